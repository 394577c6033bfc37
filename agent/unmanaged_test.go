package agent

import (
	"context"
	"testing"

	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/sim"
)

// A p4d.24xlarge launched with an EFA interface on network card 1 at
// device index 0, a trunk at card 0 device 1 and an ENI tagged no_manage
// at card 0 device 2.
const multiCardTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/20}]
securityGroups: [sg-0sim]
instances:
- id: i-gpu
  type: p4d.24xlarge
  subnet: subnet-a
  interfaces:
  - {type: efa, networkCard: 1, deviceIndex: 0, secondaryAddresses: 1}
  - {type: trunk, deviceIndex: 1}
  - {deviceIndex: 2, secondaryAddresses: 3, tags: {node.k8s.amazonaws.com/no_manage: "true"}}
- id: i-p5
  type: p5.48xlarge
  subnet: subnet-a
  interfaces:
  - {type: efa-only, networkCard: 1, deviceIndex: 0}
  - {deviceIndex: 1, tags: {node.k8s.amazonaws.com/no_manage: "true"}}
attachDelay: 20ms
detachDelay: 20ms
imdsLag: 0s
seed: 1
`

func TestForeignInterfacesAreLeftAlone(t *testing.T) {
	w := newWorldOf(t, multiCardTopology)
	before, err := w.cloud.Interfaces("i-gpu")
	if err != nil {
		t.Fatal(err)
	}
	foreign := map[string]sim.InterfaceInfo{}
	for _, i := range before {
		if i.DeviceIndex != 0 || i.NetworkCardIndex != 0 {
			foreign[i.ID] = i
		}
	}
	n := w.node("i-gpu", map[string]string{"WARM_ENI_TARGET": "1"})
	a := n.start(t)
	a.waitReady(t)

	st := a.statusView(context.Background()).(statusView)
	if len(st.Unmanaged) != 3 {
		t.Fatalf("/v1/status lists %d unmanaged interfaces %+v, want the EFA, the trunk and the no_manage ENI", len(st.Unmanaged), st.Unmanaged)
	}
	// Card 0 takes 15; the trunk and the no_manage ENI hold two.
	if st.MaxENIs != 13 {
		t.Errorf("/v1/status maxEnis = %d, want 13 (15 on card 0 less 2 unmanaged there)", st.MaxENIs)
	}
	// p4d: 50 addresses per ENI, 49 for pods. 60 pods need a second ENI
	// of the pool, which must take a free device index on card 0.
	ctx := context.Background()
	for i := range 60 {
		if _, err := a.Add(ctx, key(i), pod(i)); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
	}
	a.settle(t, func(st ipam.Stats) bool { return len(st.ENIs) >= 2 && st.Assigned == 60 })
	a.reconcile(ctx, true)

	after, err := w.cloud.Interfaces("i-gpu")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := a.view(ctx)
	for _, i := range after {
		if f, ok := foreign[i.ID]; ok {
			if len(i.Addresses) != len(f.Addresses) || len(i.Prefixes) != len(f.Prefixes) || i.DeviceIndex != f.DeviceIndex {
				t.Errorf("foreign %s %s changed: %d addresses at device %d, was %d at %d", i.InterfaceType, i.ID, len(i.Addresses), i.DeviceIndex, len(f.Addresses), f.DeviceIndex)
			}
			if _, pooled := v.ENIs[i.ID]; pooled {
				t.Errorf("foreign %s %s is in the pool", i.InterfaceType, i.ID)
			}
			delete(foreign, i.ID)
			continue
		}
		if i.NetworkCardIndex != 0 || (i.DeviceIndex != 0 && i.DeviceIndex < 3) {
			t.Errorf("the pool's ENI %s went to card %d device %d, taken by a foreign interface", i.ID, i.NetworkCardIndex, i.DeviceIndex)
		}
	}
	if len(foreign) != 0 {
		t.Errorf("foreign interfaces detached: %v", foreign)
	}
	n.host.mu.Lock()
	for id := range n.host.enis {
		if _, ok := v.ENIs[id]; !ok {
			t.Errorf("host side set up for %s, which is not the pool's", id)
		}
	}
	n.host.mu.Unlock()

	// Freed, the pool shrinks back to the primary ENI, whose addresses
	// are WARM_ENI_TARGET=1's whole ENI of them (aws-node's rule); the
	// foreign interfaces stay, whatever the pool does. The count is read
	// once the pool has settled: on the way down from three ENIs the
	// instance has five interfaces for a moment.
	for i := range 60 {
		if _, _, err := a.Del(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	a.settle(t, func(st ipam.Stats) bool {
		a.reconcile(ctx, true)
		return len(st.ENIs) == 1 && st.Assigned == 0
	})
	a.reconcile(ctx, true)
	ifs, err := w.cloud.Interfaces("i-gpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(ifs) != 4 {
		t.Fatalf("after the pods left the instance has %d interfaces, want 4 (the primary and the 3 foreign)", len(ifs))
	}
	left := map[string]bool{}
	for _, i := range ifs {
		left[i.ID] = true
	}
	for _, i := range before {
		if !left[i.ID] {
			t.Errorf("%s interface %s (card %d device %d) was detached", i.InterfaceType, i.ID, i.NetworkCardIndex, i.DeviceIndex)
		}
	}
}

// On a p5.48xlarge network card 0 takes two interfaces: with one taken by
// an ENI tagged no_manage the pool has only the primary ENI, and never
// asks EC2 for an attachment it would refuse.
func TestUnmanagedInterfacesCountAgainstTheENILimit(t *testing.T) {
	w := newWorldOf(t, multiCardTopology)
	a := w.node("i-p5", nil).start(t)
	a.waitReady(t)
	ctx := context.Background()
	for i := range 5 {
		if _, err := a.Add(ctx, key(i), pod(i)); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
	}
	a.reconcile(ctx, true)
	if got := w.callCount("AttachNetworkInterface"); got != 0 {
		t.Errorf("%d AttachNetworkInterface calls; card 0 has no slot left", got)
	}
	v, _ := a.view(ctx)
	if len(v.ENIs) != 1 || v.MaxENIs != 1 {
		t.Errorf("pool has %d ENIs, may use %d; want 1 and 1", len(v.ENIs), v.MaxENIs)
	}
	if !v.Shortfall.Short() {
		t.Errorf("no shortfall reported while WARM_ENI_TARGET=1 cannot be met")
	}
}
