package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/sim"
)

// Story 5: an agent said ready while it could not serve, and pods landed
// on a node that could not give them addresses. vpcnetd is ready only when
// it can serve and writes the CNI configuration only then; doctor says
// which condition holds it back, whether the configuration is there, and
// what CNI STATUS answers as the runtime would run it.
func TestStory5NotReady(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-s5, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}]
securityGroups: [sg-s5]
instances: [{id: i-s5, type: m5.large, subnet: subnet-a}]
faults: {"*": {errorRate: 1, code: InternalError}}
seed: 5
`, nil, false)
	n := c.Nodes[0]

	t.Run("EC2 unreachable: not ready, no configuration", func(t *testing.T) {
		poll(t, "the agent answering, not ready", 20*time.Second, func() (bool, error) {
			st, err := status(t, n)
			return err == nil && !st.Ready, err
		})
		if _, err := n.AddPod(t.Context(), "early"); err == nil {
			t.Fatal("a pod got an address from an agent that cannot reach EC2")
		} else {
			t.Logf("pod-visible: %v", err)
		}
		res := runDoctor(t, n, "--skip", "kubernetes")
		res.wantFinding(t, "agent-not-ready", doctor.Error, "doctor's own ec2 call from this node: EC2 DescribeInstances i-s5", "failing condition")
		res.wantFinding(t, "cni-config-missing", doctor.Error, "files in "+n.ConfDir()+": none", "VPCNET_CNI_CONF_DIR")
	})

	c.Cloud.SetFault("*", sim.Fault{})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("agent gone after it wrote the configuration: STATUS fails", func(t *testing.T) {
		if err := n.KillAgent(); err != nil {
			t.Fatal(err)
		}
		_, err := n.AddPod(t.Context(), "late")
		if err == nil || !strings.Contains(err.Error(), "vpcnetd") {
			t.Errorf("ADD with the agent gone failed with %v; want the agent named", err)
		}
		// The agent cannot say where its files are: the operator does.
		res := runDoctor(t, n, append([]string{"--skip", "kubernetes"}, nodePaths(n)...)...)
		res.wantFinding(t, "agent-unreachable", doctor.Error, "not reachable", "--agent")
		f := res.wantFinding(t, "cni-status-not-ready", doctor.Error, "STATUS: ", "socket")
		t.Logf("cni-status-not-ready evidence: %q", f.Evidence)
	})
}
