package main

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

func asCNIError(err error, e **types.Error) bool { return errors.As(err, e) }

// podOnENI1 is the address the fake agent hands out first: a secondary
// ENI's address, so the pod needs rule 1536 as well as 512.
var podOnENI1 = lease{addr: "10.0.1.60", table: 2}

func TestAddCheckDelForEverySpecVersion(t *testing.T) {
	for _, version := range []string{"0.4.0", "1.0.0", "1.1.0"} {
		t.Run(version, func(t *testing.T) {
			h := newHarness(t, podOnENI1)
			list := h.conflist(version, nil)
			p := h.newPod("web")
			res, err := h.add(list, p)
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			if res.Version() != version {
				t.Errorf("result version %s, want %s", res.Version(), version)
			}
			r, err := current.NewResultFromResult(res)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Interfaces) != 2 || r.Interfaces[0].Name != p.veth || r.Interfaces[1].Name != "eth0" || r.Interfaces[1].Sandbox != p.ns.Path() {
				t.Errorf("interfaces %v, want host veth %s and eth0 in %s", r.Interfaces, p.veth, p.ns.Path())
			}
			if len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.0.1.60/32" || r.IPs[0].Gateway.String() != "169.254.1.1" ||
				r.IPs[0].Interface == nil || *r.IPs[0].Interface != 1 {
				t.Errorf("IPs %v, want 10.0.1.60/32 via 169.254.1.1 on interface 1", r.IPs)
			}
			if len(r.Routes) != 1 || r.Routes[0].Dst.String() != "0.0.0.0/0" || r.Routes[0].GW.String() != "169.254.1.1" {
				t.Errorf("routes %v, want default via 169.254.1.1", r.Routes)
			}
			h.wantNodeState(
				"link "+p.veth,
				"route 10.0.1.60/32 dev "+p.veth,
				"rule 512 from <nil> to 10.0.1.60/32 table 254",
				"rule 1536 from 10.0.1.60/32 to <nil> table 2",
			)
			if err := h.check(list, p); err != nil {
				t.Errorf("CHECK: %v", err)
			}
			for i := range 2 {
				if err := h.del(list, p); err != nil {
					t.Fatalf("DEL #%d: %v", i+1, err)
				}
			}
			h.wantNodeState()
			if held := h.agent.holds(); len(held) != 0 {
				t.Errorf("agent still holds %v after DEL", held)
			}
		})
	}
}

func TestPodsAddedByThePluginReachEachOther(t *testing.T) {
	h := newHarness(t, lease{"10.0.0.50", 0}, podOnENI1)
	list := h.conflist("1.1.0", nil)
	a, b := h.newPod("a"), h.newPod("b")
	for _, p := range []pod{a, b} {
		if _, err := h.add(list, p); err != nil {
			t.Fatal(err)
		}
	}
	netnstest.Do(t, h.node, func() error { // routing between veths
		return writeSysctl("/proc/sys/net/ipv4/ip_forward", "1")
	})
	if err := netnstest.Ping(a.ns, mustAddr("10.0.1.60"), 2*time.Second); err != nil {
		t.Errorf("pod a cannot reach pod b: %v", err)
	}
	if err := netnstest.Ping(b.ns, mustAddr("10.0.0.50"), 2*time.Second); err != nil {
		t.Errorf("pod b cannot reach pod a: %v", err)
	}
}

// The agent must not have the address back, to give to the next pod,
// while a route or rule of the deleted pod still points at it.
func TestDelUnwiresThePodBeforeTheAgentHasItsAddressBack(t *testing.T) {
	h := newHarness(t, podOnENI1)
	list := h.conflist("1.1.0", nil)
	p := h.newPod("web")
	if _, err := h.add(list, p); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // the fake agent calls onDel on its own goroutine
	var atDel []string
	var dels int
	h.agent.setOnDel(func() {
		st := h.nodeState()
		mu.Lock()
		defer mu.Unlock()
		dels++
		atDel = st
	})
	if err := h.del(list, p); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if dels != 1 {
		t.Fatalf("the agent got %d Dels, want 1", dels)
	}
	// The veth pair may outlive the release (the agent or, as here, the
	// plugin deletes it after): nothing routes to it any more.
	var routing []string
	for _, l := range atDel {
		if !strings.HasPrefix(l, "link ") {
			routing = append(routing, l)
		}
	}
	if len(routing) != 0 {
		t.Errorf("when the agent was asked to release the address the node still had:\n  %s", strings.Join(routing, "\n  "))
	}
	h.wantNodeState()
	if held := h.agent.holds(); len(held) != 0 {
		t.Errorf("agent still holds %v", held)
	}
}

// A DEL does not wait for the kernel to delete the veth pair (about 20 ms)
// when the agent says it will: it returns once nothing routes to the pod.
func TestDelLeavesTheVethToAnAgentThatDeletesIt(t *testing.T) {
	h := newHarness(t, podOnENI1)
	h.agent.mu.Lock()
	h.agent.deletesVeths = true
	h.agent.mu.Unlock()
	list := h.conflist("1.1.0", nil)
	p := h.newPod("web")
	if _, err := h.add(list, p); err != nil {
		t.Fatal(err)
	}
	var index int
	netnstest.Do(t, h.node, func() error {
		l, err := netlink.LinkByName(p.veth)
		if err == nil {
			index = l.Attrs().Index
		}
		return err
	})
	if err := h.del(list, p); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	h.agent.mu.Lock()
	asked := slices.Clone(h.agent.vethDels)
	h.agent.mu.Unlock()
	if want := fmt.Sprintf("%s %d", p.veth, index); len(asked) != 1 || asked[0] != want {
		t.Fatalf("the agent was asked to delete %v, want [%s]", asked, want)
	}
	if st := h.nodeState(); len(st) != 1 || st[0] != "link "+p.veth {
		t.Errorf("after DEL the node has %v, want only the veth the agent deletes", st)
	}
}

// DEL does not require the pod's names (ADD does): without them there is
// no host veth name, and the pod is unwired from its namespace and
// address.
func TestDelWithoutThePodsNamesStillUnwiresThePod(t *testing.T) {
	h := newHarness(t, podOnENI1)
	list := h.conflist("1.1.0", nil)
	p := h.newPod("web")
	if _, err := h.add(list, p); err != nil {
		t.Fatal(err)
	}
	p.rt.Args = nil
	if err := h.del(list, p); err != nil {
		t.Fatalf("DEL without K8S_POD_NAME: %v", err)
	}
	h.wantNodeState()
	if held := h.agent.holds(); len(held) != 0 {
		t.Errorf("agent still holds %v", held)
	}
}

func TestDelSucceedsWhenTheNamespaceIsGone(t *testing.T) {
	h := newHarness(t, podOnENI1)
	list := h.conflist("1.1.0", nil)
	p := h.newPod("web")
	if _, err := h.add(list, p); err != nil {
		t.Fatal(err)
	}
	netnstest.Remove(t, p.ns)
	if err := h.del(list, p); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	h.wantNodeState()
	if held := h.agent.holds(); len(held) != 0 {
		t.Errorf("agent still holds %v", held)
	}
}

func TestDelWithTheAgentDownStillUnwiresThePod(t *testing.T) {
	for _, tt := range []struct {
		name    string
		crashed bool
	}{{"agent stopped, socket removed", false}, {"agent crashed, dead socket left", true}} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, podOnENI1)
			list := h.conflist("1.1.0", map[string]any{"timeout": "2s"})
			p := h.newPod("web")
			if _, err := h.add(list, p); err != nil {
				t.Fatal(err)
			}
			h.agent.stop(tt.crashed)
			if err := h.del(list, p); err != nil {
				t.Fatalf("DEL with the agent down: %v", err)
			}
			// No route, rule or veth survives; the agent releases the
			// address from its checkpoint when it is back.
			h.wantNodeState()
		})
	}
}

func TestDelWithoutTheNamespaceAndWithTheAgentDownLeavesNothing(t *testing.T) {
	h := newHarness(t, podOnENI1)
	list := h.conflist("1.1.0", nil)
	p := h.newPod("web")
	if _, err := h.add(list, p); err != nil {
		t.Fatal(err)
	}
	h.agent.stop(false)
	netnstest.Remove(t, p.ns)
	if err := h.del(list, p); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	h.wantNodeState()
}

func TestAddRollsBackWhenWiringFails(t *testing.T) {
	h := newHarness(t, podOnENI1)
	list := h.conflist("1.1.0", nil)
	p := h.newPod("web")
	netnstest.Do(t, p.ns, func() error { // the runtime's interface name is taken
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "x"})
	})
	_, err := h.add(list, p)
	wantCNIError(t, err, types.ErrInternal, "already has an interface eth0")
	if held := h.agent.holds(); len(held) != 0 {
		t.Errorf("address not given back after a failed ADD: agent holds %v", held)
	}
	h.wantNodeState()
}

// A runtime that repeats ADD for a live pod gets an error (the pod's
// interface exists), but the rollback must not take the address or the
// wiring from the pod the first ADD set up.
func TestARepeatedAddThatFailsLeavesTheLivePodAlone(t *testing.T) {
	h := newHarness(t, podOnENI1)
	list := h.conflist("1.1.0", nil)
	p := h.newPod("web")
	if _, err := h.add(list, p); err != nil {
		t.Fatal(err)
	}
	before := h.nodeState()
	held := h.agent.holds()
	if _, err := h.add(list, p); err == nil {
		t.Fatal("a repeated ADD on a wired pod succeeded; the test needs it to fail")
	}
	if got := h.agent.holds(); len(got) != len(held) {
		t.Errorf("after the failed repeat the agent holds %v, want %v still held", got, held)
	}
	h.wantNodeState(before...)
}

func TestAddPassesOnWhatTheAgentRanOutOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code uint
		msg  string
	}{
		{"subnet exhausted", agentapi.Errorf(agentapi.ResourceExhausted,
			"no free address: subnet subnet-0a1b (10.0.1.0/24) is exhausted and the instance has its maximum of 3 ENIs; add a subnet via ENIConfig"),
			types.ErrTryAgainLater, "subnet subnet-0a1b (10.0.1.0/24) is exhausted"},
		{"not ready", agentapi.Errorf(agentapi.Unavailable, "not ready: checkpoint not loaded yet"),
			types.ErrTryAgainLater, "not ready: checkpoint not loaded yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, podOnENI1)
			h.agent.setAddErr(tt.err)
			_, err := h.add(h.conflist("1.1.0", nil), h.newPod("web"))
			wantCNIError(t, err, tt.code, tt.msg)
			h.wantNodeState()
		})
	}
}

func TestAddWithNoAgentSaysWhereItLooked(t *testing.T) {
	h := newHarness(t)
	h.agent.stop(false)
	_, err := h.add(h.conflist("1.1.0", nil), h.newPod("web"))
	wantCNIError(t, err, types.ErrTryAgainLater, "agent socket "+h.agent.socket+" does not exist", "is vpcnetd running")
}

func TestGarbageInputGetsAPreciseError(t *testing.T) {
	tests := []struct {
		name        string
		extra       map[string]any
		args        [][2]string
		containerID string
		code        uint
		want        string
	}{
		{name: "socket not a string", extra: map[string]any{"socket": 5}, code: types.ErrDecodingFailure, want: "field socket: a JSON number cannot be a string"},
		{name: "timeout not a duration", extra: map[string]any{"timeout": "soon"}, code: types.ErrInvalidNetworkConfig, want: `field timeout: "soon" is not a positive duration`},
		{name: "veth prefix too long", extra: map[string]any{"vethPrefix": "podveth"}, code: types.ErrInvalidNetworkConfig, want: "field vethPrefix: veth prefix \"podveth\" is longer than 4 characters"},
		{name: "CNI_ARGS pair without =", args: [][2]string{{"garbage;K8S_POD_NAME", "web"}}, code: types.ErrInvalidEnvironmentVariables, want: `CNI_ARGS: "garbage" is not a KEY=VALUE pair`},
		{name: "no pod name", args: [][2]string{{"K8S_POD_NAMESPACE", "default"}}, code: types.ErrInvalidEnvironmentVariables, want: "CNI_ARGS lacks K8S_POD_NAME"},
		{name: "hostPort 0", extra: map[string]any{"runtimeConfig": map[string]any{"portMappings": []any{map[string]any{"hostPort": 0, "containerPort": 80, "protocol": "tcp"}}}},
			code: types.ErrInvalidNetworkConfig, want: "field runtimeConfig.portMappings[0]: hostPort 0 is not a port number (1-65535)"},
		{name: "portMappings not a list", extra: map[string]any{"runtimeConfig": map[string]any{"portMappings": "8080:80"}},
			code: types.ErrDecodingFailure, want: "field runtimeConfig.portMappings: a JSON string cannot be"},
		// Both used to be accepted and recorded by the agent.
		{name: "pod namespace walks a path", args: [][2]string{{"K8S_POD_NAMESPACE", "../../x"}, {"K8S_POD_NAME", "web"}},
			code: types.ErrInvalidEnvironmentVariables, want: `CNI_ARGS: pod namespace "../../x": must be a DNS-1123 label`},
		{name: "100,000-character container ID", containerID: strings.Repeat("c", 100_000),
			code: types.ErrInvalidEnvironmentVariables, want: `attachment: container ID "` + strings.Repeat("c", 64) + `"... (100000 bytes): is longer than 255 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, podOnENI1)
			p := h.newPod("web")
			if tt.args != nil {
				p.rt.Args = tt.args
			}
			if tt.containerID != "" {
				p.rt.ContainerID = tt.containerID
			}
			_, err := h.add(h.conflist("1.1.0", tt.extra), p)
			wantCNIError(t, err, tt.code, tt.want)
			if held := h.agent.holds(); len(held) != 0 {
				t.Errorf("agent was asked for an address despite bad input: %v", held)
			}
		})
	}
}

// The runtime passes a pod's hostPorts only to a plugin that declares
// portMappings (as the agent's conflist does); vpcnet hands them to the
// agent, which maps them.
func TestTheRuntimesPortMappingsReachTheAgent(t *testing.T) {
	h := newHarness(t, podOnENI1)
	list := h.conflist("1.1.0", map[string]any{"capabilities": map[string]bool{"portMappings": true}})
	p := h.newPod("web")
	p.rt.CapabilityArgs = map[string]any{"portMappings": []map[string]any{
		{"hostPort": 8080, "containerPort": 80, "protocol": "TCP"},
		{"hostPort": 53, "containerPort": 53, "protocol": "udp", "hostIP": "fd00::1"},
		{"hostPort": 9000, "containerPort": 9000, "protocol": "sctp", "hostIP": "10.0.0.10"},
	}}
	if _, err := h.add(list, p); err != nil {
		t.Fatal(err)
	}
	h.agent.mu.Lock()
	got := h.agent.ports[key(&agentapi.Attachment{Network: "vpcnet", ContainerId: p.rt.ContainerID, IfName: p.rt.IfName})]
	h.agent.mu.Unlock()
	want := []agentapi.PortMapping{
		{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
		{HostPort: 9000, ContainerPort: 9000, Protocol: "sctp", HostIp: "10.0.0.10"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("the agent got port mappings %+v, want %+v (the IPv6 one skipped)", got, want)
	}
}

func TestCheckNamesBrokenWiring(t *testing.T) {
	h := newHarness(t, podOnENI1)
	list := h.conflist("1.1.0", nil)
	p := h.newPod("web")
	if _, err := h.add(list, p); err != nil {
		t.Fatal(err)
	}
	netnstest.Do(t, h.node, func() error {
		r := netlink.NewRule()
		r.Priority, r.Table, r.Src = 1536, 2, &net.IPNet{IP: net.ParseIP("10.0.1.60"), Mask: net.CIDRMask(32, 32)}
		return netlink.RuleDel(r)
	})
	wantCNIError(t, h.check(list, p), types.ErrInternal, `rule "1536: from 10.0.1.60/32 lookup 2" is missing`)
}

func TestStatusReportsWhyTheAgentIsNotReady(t *testing.T) {
	h := newHarness(t)
	list := h.conflist("1.1.0", nil)
	if err := h.status(list); err != nil {
		t.Errorf("STATUS with a ready agent: %v", err)
	}
	h.agent.setNotReady(
		&agentapi.Condition{Name: "cloud", Message: "EC2 unreachable: dial tcp: i/o timeout"},
		&agentapi.Condition{Name: "host-network", Message: "SetupHost not run yet"},
	)
	wantCNIError(t, h.status(list), types.ErrPluginNotAvailable,
		"vpcnetd is not ready", "cloud: EC2 unreachable: dial tcp: i/o timeout", "host-network: SetupHost not run yet")
	h.agent.stop(false)
	wantCNIError(t, h.status(list), types.ErrPluginNotAvailable, "does not exist", "is vpcnetd running")
}

func TestGCHandsTheValidAttachmentsToTheAgent(t *testing.T) {
	h := newHarness(t, lease{"10.0.0.50", 0}, podOnENI1)
	list := h.conflist("1.1.0", nil)
	keep, stale := h.newPod("keep"), h.newPod("stale")
	for _, p := range []pod{keep, stale} {
		if _, err := h.add(list, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.gc(list, keep); err != nil {
		t.Fatalf("GC: %v", err)
	}
	h.agent.mu.Lock()
	reqs := slices.Clone(h.agent.gcRequests)
	h.agent.mu.Unlock()
	if len(reqs) != 1 || reqs[0].Network != "vpcnet" || len(reqs[0].Valid) != 1 ||
		reqs[0].Valid[0].ContainerId != "sandbox-keep" || reqs[0].Valid[0].IfName != "eth0" || reqs[0].Valid[0].Network != "vpcnet" {
		t.Errorf("agent GC requests %v, want one for network vpcnet with only sandbox-keep/eth0 valid", reqs)
	}
	// libcni itself sends DEL for the cached attachment not in the set.
	h.wantNodeState(
		"link "+keep.veth,
		"route 10.0.0.50/32 dev "+keep.veth,
		"rule 512 from <nil> to 10.0.0.50/32 table 254",
	)
}

// An IPv6 node's configuration says ipv6: the pod gets the agent's IPv6
// address as a /128 with fe80::1 as its gateway, as aws-node's IPv6 mode
// answers, and CHECK and DEL know it.
func TestIPv6PodAddCheckDel(t *testing.T) {
	h := newHarness(t, lease{"2600:1f14:abc:de01:12::7", 0})
	list := h.conflist("1.1.0", map[string]any{"ipv6": true})
	p := h.newPod("web")
	res, err := h.add(list, p)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.IPs) != 1 || r.IPs[0].Address.String() != "2600:1f14:abc:de01:12::7/128" || r.IPs[0].Gateway.String() != "fe80::1" {
		t.Errorf("IPs %v, want 2600:1f14:abc:de01:12::7/128 via fe80::1", r.IPs)
	}
	if len(r.Routes) != 1 || r.Routes[0].Dst.String() != "::/0" || r.Routes[0].GW.String() != "fe80::1" {
		t.Errorf("routes %v, want ::/0 via fe80::1", r.Routes)
	}
	h.wantNodeState(
		"link "+p.veth,
		"route 2600:1f14:abc:de01:12::7/128 dev "+p.veth,
		"rule 512 from <nil> to 2600:1f14:abc:de01:12::7/128 table 254",
	)
	if err := h.check(list, p); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	for i := range 2 {
		if err := h.del(list, p); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	h.wantNodeState()
}

// A configuration and an agent that disagree on the family fail the ADD,
// naming the address, and leave nothing wired.
func TestIPv6ConfigurationRefusesAnIPv4AddressFromTheAgent(t *testing.T) {
	h := newHarness(t, lease{"10.0.1.60", 0})
	list := h.conflist("1.1.0", map[string]any{"ipv6": true})
	p := h.newPod("web")
	_, err := h.add(list, p)
	wantCNIError(t, err, types.ErrInternal, `returned address "10.0.1.60", which is not an IPv6 address (the CNI configuration says ipv6)`)
	h.wantNodeState()
}
