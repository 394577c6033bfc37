package agent

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

var customNetworking = map[string]string{"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true", "VPCNET_ADD_WAIT": "1s"}

func foundENIConfig(subnet string, groups ...string) ENIConfigState {
	return ENIConfigState{Name: "us-west-2a", From: "label topology.kubernetes.io/zone", Known: true, Found: true, Subnet: subnet, SecurityGroups: groups}
}

var podSubnet = netip.MustParsePrefix("10.0.4.0/24")

// attached lists the instance's ENIs as EC2 has them.
func attached(t *testing.T, a *running, instance string) []cloud.ENI {
	t.Helper()
	enis, err := a.cloud.ListENIs(context.Background(), cloud.ENIFilter{InstanceID: instance})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(enis, func(x, y cloud.ENI) int { return x.Attachment.DeviceIndex - y.Attachment.DeviceIndex })
	return enis
}

func TestCustomNetworkingPutsPodsOnTheENIConfigsSubnetNeverOnThePrimaryENI(t *testing.T) {
	w := newWorld(t)
	k := newFakeKube(KubeState{Reachable: true, Node: "n", ENIConfig: foundENIConfig("subnet-pods", "sg-pods")})
	n := w.node("i-node1", customNetworking)
	n.kube = k
	a := n.start(t)
	a.waitReady(t)
	c := a.waitCondition(t, CondENIConfig, true, "new ENIs in subnet-pods with security groups sg-pods")
	if !strings.Contains(c.Message, "ENIConfig us-west-2a (named by label topology.kubernetes.io/zone)") {
		t.Errorf("condition %q does not name the ENIConfig and where its name came from", c.Message)
	}
	ctx := context.Background()
	for i := range 3 {
		as, err := a.Add(ctx, key(i), pod(i))
		if err != nil {
			t.Fatal(err)
		}
		if !podSubnet.Contains(as.Addr) {
			t.Errorf("pod %d got %s, outside the ENIConfig's subnet %s", i, as.Addr, podSubnet)
		}
	}
	enis := attached(t, a, "i-node1")
	if len(enis) < 2 {
		t.Fatalf("%d ENIs attached, want the primary and at least one for pods", len(enis))
	}
	if p := enis[0]; len(p.SecondaryIPs) != 0 || len(p.Prefixes) != 0 {
		t.Errorf("primary ENI %s was given %v %v: its addresses are not for pods", p.ID, p.SecondaryIPs, p.Prefixes)
	}
	for _, e := range enis[1:] {
		if e.SubnetID != "subnet-pods" || !slices.Equal(e.SecurityGroups, []string{"sg-pods"}) {
			t.Errorf("pod ENI %s in %s with %v, want subnet-pods with [sg-pods]", e.ID, e.SubnetID, e.SecurityGroups)
		}
	}
}

func TestCustomNetworkingWithoutItsENIConfigIsNotReadyAndSaysWhichItLookedFor(t *testing.T) {
	w := newWorld(t)
	missing := "ENIConfig us-west-2a (named by label topology.kubernetes.io/zone) does not exist: create it"
	k := newFakeKube(KubeState{Reachable: true, Node: "n", ENIConfig: ENIConfigState{Name: "us-west-2a", From: "label topology.kubernetes.io/zone", Known: true, Problem: missing}})
	n := w.node("i-node1", customNetworking)
	n.kube = k
	a := n.start(t)
	a.waitCondition(t, CondENIConfig, false, missing)
	a.waitCondition(t, CondSocket, true, "serving")

	// Pods wait, and are told why.
	_, err := a.Add(context.Background(), key(1), pod(1))
	var noAddr *NoAddressError
	if !errors.As(err, &noAddr) || noAddr.Reason != ReasonENIConfig || !strings.Contains(noAddr.Detail, missing) {
		t.Fatalf("Add = %v; want no address because of the missing ENIConfig", err)
	}
	if e := k.waitEvent(t, EventENIConfig, pod(1)); !strings.Contains(e.Message, "us-west-2a") {
		t.Errorf("pod Event %q does not name the ENIConfig", e.Message)
	}
	k.waitEvent(t, EventENIConfig, ipam.Pod{})
	if ready, _ := a.ready.get(); ready {
		t.Fatal("ready without the ENIConfig")
	}
	if enis := attached(t, a, "i-node1"); len(enis) != 1 || len(enis[0].SecondaryIPs) != 0 {
		t.Fatalf("EC2 shows %d ENIs (primary with %d secondaries); want nothing attached or assigned without the ENIConfig", len(enis), len(enis[0].SecondaryIPs))
	}
	if _, err := os.Stat(filepath.Join(n.env["VPCNET_CNI_CONF_DIR"], "10-vpcnet.conflist")); err == nil {
		t.Fatal("CNI config written while not ready")
	}
	if slices.Contains(k.readyCalls(), true) {
		t.Fatal("the Kubernetes layer was told the agent is ready (the startup taint would go)")
	}

	// The ENIConfig is created: the watch says so, and the agent follows.
	k.set(func(st *KubeState) { st.ENIConfig = foundENIConfig("subnet-pods") })
	a.waitReady(t)
	as, err := a.Add(context.Background(), key(2), pod(2))
	if err != nil || !podSubnet.Contains(as.Addr) {
		t.Fatalf("Add after the ENIConfig appeared = %v, %v; want an address in %s", as.Addr, err, podSubnet)
	}
	if enis := attached(t, a, "i-node1"); !slices.Equal(enis[1].SecurityGroups, []string{"sg-0sim"}) {
		t.Errorf("pod ENI groups %v; an ENIConfig without groups means the primary ENI's [sg-0sim]", enis[1].SecurityGroups)
	}
	k.waitToldReady(t)
}

func TestAnENIConfigTheNodeCannotUseIsNamedWithTheReason(t *testing.T) {
	tests := []struct {
		name string
		kube Kube
		want []string
	}{
		{"subnet in another zone", newFakeKube(KubeState{Reachable: true, Node: "n", ENIConfig: foundENIConfig("subnet-2b")}),
			[]string{"ENIConfig us-west-2a (named by label topology.kubernetes.io/zone) names subnet subnet-2b", "zone us-west-2b", "this node is in us-west-2a"}},
		{"subnet that does not exist", newFakeKube(KubeState{Reachable: true, Node: "n", ENIConfig: foundENIConfig("subnet-nope")}),
			[]string{"names subnet subnet-nope", "InvalidSubnetID.NotFound"}},
		{"no Kubernetes API", nil,
			[]string{"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true needs the Kubernetes API", "VPCNET_KUBECONFIG"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			n := w.node("i-node1", customNetworking)
			n.kube = tt.kube
			a := n.start(t)
			c := a.waitCondition(t, CondENIConfig, false, tt.want[0])
			for _, want := range tt.want[1:] {
				if !strings.Contains(c.Message, want) {
					t.Errorf("condition %q does not say %q", c.Message, want)
				}
			}
			a.reconcile(context.Background(), true) // one more pass, with the pool short
			if enis := attached(t, a, "i-node1"); len(enis) != 1 {
				t.Errorf("%d ENIs attached with an unusable ENIConfig, want only the primary", len(enis))
			}
		})
	}
}

func TestCustomNetworkingKeepsPodsOnThePrimaryENIUntilTheyGo(t *testing.T) {
	w := newWorld(t)
	// A node that ran without custom networking, with one pod on the
	// primary ENI, is switched over.
	n := w.node("i-node1", map[string]string{"IP_COOLDOWN_PERIOD": "0"})
	a := n.start(t)
	a.waitReady(t)
	old, err := a.Add(context.Background(), key(1), pod(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}

	n.env["AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"] = "true"
	k := newFakeKube(KubeState{Reachable: true, Node: "n", ENIConfig: foundENIConfig("subnet-pods")})
	n.kube = k
	a = n.start(t)
	a.waitReady(t)
	if as, ok := a.lookup(key(1)); !ok || as.Addr != old.Addr {
		t.Fatalf("the running pod lost its address %s across the switch: %v %v", old.Addr, as, ok)
	}
	for i := 2; i < 6; i++ {
		as, err := a.Add(context.Background(), key(i), pod(i))
		if err != nil {
			t.Fatal(err)
		}
		if !podSubnet.Contains(as.Addr) {
			t.Errorf("new pod %d got %s on the primary ENI's subnet", i, as.Addr)
		}
	}
	// The old pod goes; its address is not given to a new one.
	if _, _, err := a.Del(context.Background(), key(1)); err != nil {
		t.Fatal(err)
	}
	a.settle(t, func(st ipam.Stats) bool { return st.ENIs[0].Total == 0 })
	as, err := a.Add(context.Background(), key(9), pod(9))
	if err != nil || !podSubnet.Contains(as.Addr) {
		t.Fatalf("pod after the old one left = %v, %v; want an address in %s", as.Addr, err, podSubnet)
	}
}
