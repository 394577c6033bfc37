package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// addAsync starts an ADD and returns its outcome on the channel, for a
// test that looks at the node while the plugin waits on the agent.
func (h *harness) addAsync(list *libcni.NetworkConfigList, p pod) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		if nerr := h.node.Do(func(ns.NetNS) error {
			_, err = h.cni.AddNetworkList(ctx, list, p.rt)
			return nil
		}); nerr != nil {
			err = nerr
		}
		done <- err
	}()
	return done
}

// waitNodeState waits up to 10 s for the node's state to become want.
func (h *harness) waitNodeState(want ...string) {
	h.t.Helper()
	h.waitState("node", h.nodeState, want)
}

// waitPodState waits up to 10 s for p's state to become want.
func (h *harness) waitPodState(p pod, want ...string) {
	h.t.Helper()
	h.waitState("pod", func() []string { return h.podState(p) }, want)
}

func (h *harness) waitState(what string, state func() []string, want []string) {
	h.t.Helper()
	want = slices.Sorted(slices.Values(want))
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = state(); slices.Equal(got, want) {
			return
		}
	}
	h.t.Fatalf("%s state:\n  %s\nnever became:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
}

// podState lists the pod's interfaces (lo left out) with their up flag,
// MTU and IPv4 addresses, and its main-table routes.
func (h *harness) podState(p pod) []string {
	h.t.Helper()
	var out []string
	netnstest.Do(h.t, p.ns, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			a := l.Attrs()
			if a.Name == "lo" {
				continue
			}
			out = append(out, fmt.Sprintf("link %s up=%v mtu %d", a.Name, a.RawFlags&1 != 0, a.MTU)) // IFF_UP
			addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			for _, ad := range addrs {
				out = append(out, "addr "+ad.IPNet.String()+" dev "+a.Name)
			}
		}
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, r := range routes {
			out = append(out, fmt.Sprintf("route %v via %v", r.Dst, r.Gw))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func (h *harness) wantPodState(p pod, want ...string) {
	h.t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := h.podState(p); !slices.Equal(got, want) {
		h.t.Errorf("pod state:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// linkIDs names the pod's two veth ends by index and MAC, which a veth
// deleted and made again would not keep.
func (h *harness) linkIDs(p pod) string {
	h.t.Helper()
	id := func(n ns.NetNS, name string) string {
		var s string
		netnstest.Do(h.t, n, func() error {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			s = fmt.Sprintf("%s#%d(%s)", name, l.Attrs().Index, l.Attrs().HardwareAddr)
			return nil
		})
		return s
	}
	return id(h.node, p.veth) + " " + id(p.ns, "eth0")
}

func waitArrived(t *testing.T, arrived <-chan struct{}) {
	t.Helper()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin's Add never reached the agent")
	}
}

func waitAdd(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("ADD did not return")
		return nil
	}
}

// prewiredPod is a pod's state once its veth is made and before the agent
// answers: up and routed through the gateway, with no address.
var prewiredPod = []string{
	"link eth0 up=true mtu 9001",
	"route 169.254.1.1/32 via <nil>",
	"route 0.0.0.0/0 via 169.254.1.1",
}

func TestTheVethIsMadeWhileTheAgentIsStillChoosingTheAddress(t *testing.T) {
	h := newHarness(t, podOnENI1)
	list := h.conflist("1.1.0", nil)
	p := h.newPod("web")
	arrived, release := h.agent.holdAdds(nil)
	done := h.addAsync(list, p)
	waitArrived(t, arrived)

	// No route or rule on the node yet: those point at the address the
	// agent has not given.
	h.waitPodState(p, prewiredPod...)
	h.wantNodeState("link " + p.veth)

	close(release)
	if err := waitAdd(t, done); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	h.wantNodeState(
		"link "+p.veth,
		"route 10.0.1.60/32 dev "+p.veth,
		"rule 512 from <nil> to 10.0.1.60/32 table 254",
		"rule 1536 from 10.0.1.60/32 to <nil> table 2",
	)
	h.wantPodState(p, append(slices.Clone(prewiredPod), "addr 10.0.1.60/32 dev eth0")...)
	if err := h.check(list, p); err != nil {
		t.Errorf("CHECK: %v", err)
	}
}

func TestAnAddTheAgentDoesNotGrantLeavesNoVethAndNoAddress(t *testing.T) {
	for _, tt := range []struct {
		name string
		// hold: the agent holds the Add until the veth exists, then
		// answers with refuse, or never when refuse is nil.
		hold    bool
		refuse  error
		stopped bool
		code    uint
		want    []string
	}{
		{name: "agent refuses once the veth exists", hold: true,
			refuse: agentapi.Errorf(agentapi.ResourceExhausted, "no free address: subnet subnet-0a1b is exhausted"),
			code:   types.ErrTryAgainLater, want: []string{"subnet subnet-0a1b is exhausted"}},
		{name: "agent answers too late", hold: true,
			code: types.ErrTryAgainLater, want: []string{"vpcnetd did not answer add within 2s"}},
		// The plugin fails at once, likely while the veth is being made.
		{name: "agent not running", stopped: true,
			code: types.ErrTryAgainLater, want: []string{"does not exist", "is vpcnetd running"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, podOnENI1)
			list := h.conflist("1.1.0", map[string]any{"timeout": "2s"})
			p := h.newPod("web")
			if tt.stopped {
				h.agent.stop(false)
			}
			var arrived <-chan struct{}
			var release chan<- struct{}
			if tt.hold {
				arrived, release = h.agent.holdAdds(tt.refuse)
			}
			done := h.addAsync(list, p)
			if tt.hold {
				waitArrived(t, arrived)
				h.waitNodeState("link " + p.veth)
				if tt.refuse != nil {
					close(release)
				} else {
					defer close(release)
				}
			}
			wantCNIError(t, waitAdd(t, done), tt.code, tt.want...)
			h.wantNodeState()
			h.wantPodState(p)
			if held := h.agent.holds(); len(held) != 0 {
				t.Errorf("agent holds %v after the failed ADD", held)
			}
		})
	}
}

func TestAWiringFailureAfterTheAgentAnsweredGivesTheAddressBack(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply func(*agentapi.AddReply)
		want  string
	}{
		// Fails before any wiring that needs the address.
		{"address not IPv4", func(r *agentapi.AddReply) { r.Address = "fd00::60" }, `returned address "fd00::60", which is not an IPv4 address`},
		// These fail in the wiring that follows the reply.
		{"route table the kernel's", func(r *agentapi.AddReply) { r.RouteTable = 254 }, "wire pod: pod config: route table 254 is reserved"},
		{"pod MTU below IPv4's minimum", func(r *agentapi.AddReply) { r.PodMtu = 100 }, "wire pod: pod config: MTU 100 is outside 576-9001"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, podOnENI1)
			list := h.conflist("1.1.0", nil)
			p := h.newPod("web")
			h.agent.setEditReply(tt.reply)
			arrived, release := h.agent.holdAdds(nil)
			done := h.addAsync(list, p)
			waitArrived(t, arrived)
			h.waitNodeState("link " + p.veth)
			close(release)
			wantCNIError(t, waitAdd(t, done), types.ErrInternal, tt.want)
			h.wantNodeState()
			h.wantPodState(p)
			if held := h.agent.holds(); len(held) != 0 {
				t.Errorf("address not given back after a failed ADD: agent holds %v", held)
			}
		})
	}
}

// The first ADD created the veth with dataplane's default MTU, before the
// agent said which the pod gets.
func TestBothVethEndsGetThePodMTUTheAgentAnswers(t *testing.T) {
	for _, mtu := range []int32{9001, 1500} {
		t.Run(fmt.Sprint(mtu), func(t *testing.T) {
			h := newHarness(t, podOnENI1)
			list := h.conflist("1.1.0", nil)
			p := h.newPod("web")
			h.agent.setEditReply(func(r *agentapi.AddReply) { r.PodMtu = mtu })
			if _, err := h.add(list, p); err != nil {
				t.Fatalf("ADD: %v", err)
			}
			h.wantPodState(p,
				fmt.Sprintf("link eth0 up=true mtu %d", mtu),
				"addr 10.0.1.60/32 dev eth0",
				"route 169.254.1.1/32 via <nil>",
				"route 0.0.0.0/0 via 169.254.1.1",
			)
			netnstest.Do(t, h.node, func() error {
				l, err := netlink.LinkByName(p.veth)
				if err != nil {
					return err
				}
				if l.Attrs().MTU != int(mtu) {
					t.Errorf("host veth MTU %d, want %d", l.Attrs().MTU, mtu)
				}
				return nil
			})
			if err := h.check(list, p); err != nil {
				t.Errorf("CHECK: %v", err)
			}
		})
	}
}

// A runtime repeats ADD for a running pod: the veth that could be made
// while the agent answers must not replace the pod's own, whose host end
// has the same name, even for a moment.
func TestARepeatedAddLeavesTheRunningPodsVethInPlace(t *testing.T) {
	for _, tt := range []struct {
		name string
		hold bool
	}{{"agent answers at once", false}, {"agent answers late", true}} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, podOnENI1)
			list := h.conflist("1.1.0", nil)
			p := h.newPod("web")
			if _, err := h.add(list, p); err != nil {
				t.Fatal(err)
			}
			ids, node, inPod, held := h.linkIDs(p), h.nodeState(), h.podState(p), h.agent.holds()

			var arrived <-chan struct{}
			var release chan<- struct{}
			if tt.hold {
				arrived, release = h.agent.holdAdds(nil)
			}
			done := h.addAsync(list, p)
			if tt.hold {
				waitArrived(t, arrived)
				if got := h.linkIDs(p); got != ids {
					t.Errorf("while the agent answered the pod's veth became %s, was %s", got, ids)
				}
				close(release)
			}
			wantCNIError(t, waitAdd(t, done), types.ErrInternal, "wire pod: pod network namespace", "already has an interface eth0")

			if got := h.linkIDs(p); got != ids {
				t.Errorf("the pod's veth became %s, was %s", got, ids)
			}
			h.wantNodeState(node...)
			h.wantPodState(p, inPod...)
			if got := h.agent.holds(); !maps.Equal(got, held) {
				t.Errorf("agent holds %v, want %v still held", got, held)
			}
			if err := h.check(list, p); err != nil {
				t.Errorf("CHECK of the running pod: %v", err)
			}
		})
	}
}
