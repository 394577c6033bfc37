package e2e

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
)

// Issue 12, point 6, end to end: vpcnetd signs with the instance's
// credentials, the local cloud applies the instance's role, and the
// agent's start-up DryRun probes name what the role lacks while it serves
// pods from what it may do.
func TestIAMPreflightNamesWhatTheRoleLacks(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-iam, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/22}]
securityGroups: [sg-iam]
instances: [{id: i-narrow, type: m5.large, subnet: subnet-a, role: narrow}]
roles:
  narrow: {deny: [DeleteNetworkInterface, CreateTags]}
attachDelay: 1s
seed: 1
`, nil, true)
	n := c.Nodes[0]
	ctx := t.Context()
	if _, err := n.AddPod(ctx, "web"); err != nil {
		t.Fatalf("a pod on the primary ENI's addresses: %v", err)
	}
	var st introspect.Status
	poll(t, "the preflight's verdict in /v1/status", 20*time.Second, func() (bool, error) {
		body, err := n.Get(ctx, "/v1/status")
		if err != nil {
			return false, err
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return false, err
		}
		return len(st.IAM.Missing) > 0, nil
	})
	var actions []string
	for _, m := range st.IAM.Missing {
		actions = append(actions, m.Action)
	}
	if !slices.Equal(actions, []string{"ec2:CreateTags", "ec2:DeleteNetworkInterface"}) {
		t.Errorf("missing %v, want ec2:CreateTags and ec2:DeleteNetworkInterface", actions)
	}
	if !slices.Contains(st.IAM.FeaturesOff, "leaked-ENI collection") {
		t.Errorf("features off %v: leaked-ENI collection runs without ec2:DeleteNetworkInterface", st.IAM.FeaturesOff)
	}
	log, err := os.ReadFile(n.AgentLog())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "missing EC2 permission") || !strings.Contains(string(log), `"action":"ec2:DeleteNetworkInterface"`) {
		t.Errorf("the agent's log does not name the missing permission:\n%s", tail(string(log), 20))
	}
}
