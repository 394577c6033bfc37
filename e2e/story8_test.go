package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/simcluster"
)

// status reads the node agent's /v1/status.
func status(t *testing.T, n *simcluster.Node) (introspect.Status, error) {
	t.Helper()
	var st introspect.Status
	body, err := n.Get(t.Context(), "/v1/status")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(body, &st)
}

// Story 8: a freed address waits out a cooldown before another pod gets
// it. On a node whose every spare address is cooling, a new pod waits;
// doctor says so and when the first address comes free.
func TestStory8EveryFreeAddressCooling(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-s8, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}]
securityGroups: [sg-s8]
instanceTypes: [{name: x9.one, maxENIs: 1, ipv4PerENI: 3}]
instances: [{id: i-s8, type: x9.one, subnet: subnet-a}]
seed: 8
`, map[string][]string{"i-s8": {"IP_COOLDOWN_PERIOD=120", "VPCNET_ADD_WAIT=20s"}}, true)
	n := c.Nodes[0]
	var pods []*simcluster.Pod
	for _, name := range []string{"web-0", "web-1"} {
		p, err := n.AddPod(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	if err := n.DelPod(t.Context(), pods[0]); err != nil {
		t.Fatal(err)
	}
	added := make(chan error, 1)
	go func() {
		_, err := n.AddPod(t.Context(), "web-2")
		added <- err
	}()
	poll(t, "the new pod's ADD waiting in the agent", 10*time.Second, func() (bool, error) {
		st, err := status(t, n)
		return st.Waiting > 0, err
	})

	res := runDoctor(t, n, "--skip", "kubernetes")
	f := res.wantFinding(t, "addresses-cooling", doctor.Error, "1 cooling, 0 free; 1 ADDs waiting", "WARM_IP_TARGET")
	if !strings.Contains(f.What, "the first comes free at") {
		t.Errorf("addresses-cooling does not say when the first address is free: %s", f.What)
	}
	// The node cannot grow either (one ENI), so the ADD's reason is the
	// limit; the pool it prints shows the cooling address and its time.
	if err := <-added; err == nil || !strings.Contains(err.Error(), "1 cooling (first free at") {
		t.Errorf("ADD while every spare address cools failed with %v; want the cooling address and its free time", err)
	}
}
