package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/simcluster"
)

// Issue 12, point 2: a p4d.24xlarge launched with an EFA interface on
// network card 1 at device index 0 (where EFA launch templates put it)
// and an ENI tagged no_manage on card 0. The agent comes up ready with the
// real primary ENI, pods get addresses on ENIs the pool attaches at free
// device indexes of card 0 and reach each other and the node, and the
// foreign interfaces keep their attachment and addresses throughout.
func TestNodeShapeForeignInterfacesOnAMultiCardNode(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-ns2, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/22}]
securityGroups: [sg-ns2]
instances:
- id: i-p4d
  type: p4d.24xlarge
  subnet: subnet-a
  interfaces:
  - {type: efa, networkCard: 1, deviceIndex: 0, secondaryAddresses: 2}
  - {deviceIndex: 1, secondaryAddresses: 2, tags: {node.k8s.amazonaws.com/no_manage: "true"}}
attachDelay: 200ms
seed: 2
`, nil, true)
	n := c.Nodes[0]
	before, err := c.Cloud.Interfaces("i-p4d")
	if err != nil {
		t.Fatal(err)
	}
	st, err := status(t, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unmanaged) != 2 {
		t.Errorf("/v1/status lists unmanaged interfaces %+v, want the EFA and the no_manage ENI", st.Unmanaged)
	}
	// 52 pods: more than the primary ENI's 49 addresses, so some get
	// addresses of an ENI the pool attached.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var pods []*simcluster.Pod
	for i := range 52 {
		p, err := n.AddPod(ctx, fmt.Sprintf("gpu-%d", i))
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		pods = append(pods, p)
	}
	if ok, errs := c.CheckInsideVPC(ctx, append(pods[:2:2], pods[len(pods)-2:]...)); ok == 0 || len(errs) > 0 {
		t.Errorf("pods on the node cannot reach each other: %d paths ok, errors %v", ok, errs)
	}
	after, err := c.Cloud.Interfaces("i-p4d")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]bool{}
	for _, i := range after {
		byID[i.ID] = true
		if i.InterfaceType == "interface" && i.NetworkCardIndex == 0 && i.DeviceIndex == 1 && len(i.Addresses) != 3 {
			t.Errorf("the no_manage ENI %s holds %d addresses, had 3", i.ID, len(i.Addresses))
		}
		if i.InterfaceType == "efa" && (i.NetworkCardIndex != 1 || len(i.Addresses) != 3) {
			t.Errorf("the EFA %s is on card %d with %d addresses; was on card 1 with 3", i.ID, i.NetworkCardIndex, len(i.Addresses))
		}
	}
	if len(after) <= len(before) {
		t.Errorf("the pool attached no ENI of its own for 52 pods: %d interfaces", len(after))
	}
	for _, i := range before {
		if !byID[i.ID] {
			t.Errorf("%s interface %s (card %d device %d) was detached", i.InterfaceType, i.ID, i.NetworkCardIndex, i.DeviceIndex)
		}
	}
	for _, p := range pods {
		eni, _, ok := c.ENIOf("i-p4d", p.Addr)
		if !ok {
			t.Errorf("pod %s address %s is on no ENI of the node", p.Name, p.Addr)
			continue
		}
		for _, i := range before {
			if i.ID == eni && (i.NetworkCardIndex != 0 || i.DeviceIndex != 0) {
				t.Errorf("pod %s got %s of foreign interface %s", p.Name, p.Addr, eni)
			}
		}
	}
	// Doctor explains why EC2 shows more interfaces than the pool uses.
	res := runDoctor(t, n, "--skip", "kubernetes")
	res.wantFinding(t, "interfaces-unmanaged", doctor.Info, "is of type efa", "remove the no_manage tag")
}
