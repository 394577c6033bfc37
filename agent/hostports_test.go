package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/hostport"
	"github.com/vpcnet/vpcnet/internal/testlog"
	"github.com/vpcnet/vpcnet/ipam"
)

// fakePorts records the hostPort rules the agent writes, as the kernel
// would hold them; fail makes the next writes fail.
type fakePorts struct {
	mu      sync.Mutex
	entries []hostport.Entry
	writes  int
	fail    error
	// wrote, if set, hears of every write.
	wrote chan struct{}
	// forgot are the UDP ports whose flows the agent asked to forget.
	forgot []uint16
}

func (f *fakePorts) ForgetUDPFlows(_ context.Context, ports []uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgot = append(f.forgot, ports...)
	return nil
}

func (f *fakePorts) SetHostPorts(_ context.Context, entries []hostport.Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.entries = entries
	f.writes++
	if f.wrote != nil {
		select {
		case f.wrote <- struct{}{}:
		default:
		}
	}
	return nil
}

// rules lists the mappings in force as "addr mapping".
func (f *fakePorts) rules() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.entries {
		for _, m := range e.Mappings {
			out = append(out, e.Addr.String()+" "+m.String())
		}
	}
	return out
}

func (f *fakePorts) failWith(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

// servingNode starts one node's agent, whose veths (when set) delete
// veths for it, and returns a client of its plugin socket.
func servingNode(t *testing.T, veths Veths) (*node, *running, *agentapi.Client) {
	t.Helper()
	n := newWorld(t).node("i-node1", nil)
	n.veths = veths
	a := n.start(t)
	a.waitReady(t)
	return n, a, &agentapi.Client{Socket: n.env["VPCNET_SOCKET"]}
}

func web(container string) *agentapi.Attachment {
	return &agentapi.Attachment{Network: "aws-cni", ContainerId: container, IfName: "eth0"}
}

var port8080 = []agentapi.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}

func TestAPodsHostPortsAreMappedWithItsAddressAndGoWithIt(t *testing.T) {
	n, _, c := servingNode(t, nil)
	ctx := context.Background()

	add, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "web", PortMappings: port8080})
	if err != nil {
		t.Fatal(err)
	}
	want := add.Address + " *:8080/tcp->80"
	if got := n.ports.rules(); len(got) != 1 || got[0] != want {
		t.Fatalf("rules after Add = %v, want [%s] before the reply", got, want)
	}
	data, err := os.ReadFile(n.env["VPCNET_STATE_DIR"] + "/hostports.json")
	if err != nil || !strings.Contains(string(data), add.Address) {
		t.Fatalf("hostport file = %q, %v; want it to hold %s", data, err, add.Address)
	}
	// Adds without hostPorts never touch the rules.
	writes := n.ports.writes
	if _, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c2"), PodNamespace: "default", PodName: "plain"}); err != nil {
		t.Fatal(err)
	}
	if n.ports.writes != writes {
		t.Errorf("an Add without hostPorts rewrote the rules")
	}
	if _, err := c.Del(ctx, &agentapi.DelRequest{Attachment: web("c1")}); err != nil {
		t.Fatal(err)
	}
	if got := n.ports.rules(); len(got) != 0 {
		t.Errorf("rules after Del = %v, want none", got)
	}
}

// As portmap does: a UDP client that sent to the port before the pod's
// rules existed has a flow conntrack would keep sending past them.
func TestANewUDPHostPortForgetsTheFlowsToIt(t *testing.T) {
	n, _, c := servingNode(t, nil)
	ctx := context.Background()
	dns := []agentapi.PortMapping{{HostPort: 53, ContainerPort: 5353, Protocol: "udp"}, {HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}
	for range 2 { // the repeated ADD maps nothing new
		if _, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "dns", PortMappings: dns}); err != nil {
			t.Fatal(err)
		}
	}
	n.ports.mu.Lock()
	defer n.ports.mu.Unlock()
	if !slices.Equal(n.ports.forgot, []uint16{53}) {
		t.Errorf("UDP flows forgotten for ports %v, want [53] once", n.ports.forgot)
	}
}

func TestAHostPortTakenByAnotherPodFailsTheAddAndReleasesItsAddress(t *testing.T) {
	n, _, c := servingNode(t, nil)
	ctx := context.Background()
	if _, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "first", PortMappings: port8080}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c2"), PodNamespace: "default", PodName: "second", PortMappings: port8080})
	if err == nil || !strings.Contains(err.Error(), "taken by pod default/first") {
		t.Fatalf("second Add of hostPort 8080 = %v, want it refused naming default/first", err)
	}
	if _, err := c.Check(ctx, &agentapi.CheckRequest{Attachment: web("c2")}); agentapi.CodeOf(err) != agentapi.NotFound {
		t.Errorf("the refused Add still holds an address (Check = %v)", err)
	}
	if got := n.ports.rules(); len(got) != 1 {
		t.Errorf("rules = %v, want only the first pod's", got)
	}
}

func TestHostPortRulesThatCannotBeWrittenFailTheAddAndLeaveNothing(t *testing.T) {
	n, _, c := servingNode(t, nil)
	ctx := context.Background()
	n.ports.failWith(errors.New("nftables: operation not permitted"))
	_, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "web", PortMappings: port8080})
	if err == nil || !strings.Contains(err.Error(), "operation not permitted") {
		t.Fatalf("Add = %v, want the rule writer's error", err)
	}
	if _, err := c.Check(ctx, &agentapi.CheckRequest{Attachment: web("c1")}); agentapi.CodeOf(err) != agentapi.NotFound {
		t.Errorf("the failed Add still holds an address (Check = %v)", err)
	}
	n.ports.failWith(nil)
	if _, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "web", PortMappings: port8080}); err != nil {
		t.Fatalf("the runtime's retry = %v", err)
	}
}

func TestARestartWritesTheHostPortRulesAgain(t *testing.T) {
	n, a, c := servingNode(t, nil)
	ctx := context.Background()
	live, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("live"), PodNamespace: "default", PodName: "live", PortMappings: port8080})
	if err != nil {
		t.Fatal(err)
	}
	n.host.route(netip.MustParseAddr(live.Address), true)
	gone, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("gone"), PodNamespace: "default", PodName: "gone",
		PortMappings: []agentapi.PortMapping{{HostPort: 9090, ContainerPort: 90, Protocol: "udp"}}})
	if err != nil {
		t.Fatal(err)
	}
	n.host.route(netip.MustParseAddr(gone.Address), true)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	// While the agent was down the node rebooted its rules away.
	n.ports = &fakePorts{}
	a = n.start(t)
	a.waitReady(t)
	if got := n.ports.rules(); len(got) != 2 {
		t.Fatalf("rules after the restart = %v, want both pods' from the agent's file", got)
	}
	if _, err := c.Del(ctx, &agentapi.DelRequest{Attachment: web("gone")}); err != nil {
		t.Fatal(err)
	}
	want := live.Address + " *:8080/tcp->80"
	if got := n.ports.rules(); len(got) != 1 || got[0] != want {
		t.Errorf("rules after the DEL = %v, want [%s]", got, want)
	}
}

func TestAnUnreadableHostPortFileIsSetAsideAndTheAgentStarts(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	path := n.env["VPCNET_STATE_DIR"] + "/hostports.json"
	if err := os.WriteFile(path, []byte(`{"version":1,"entries":[{"key":`), 0o600); err != nil {
		t.Fatal(err)
	}
	a := n.start(t)
	a.waitReady(t)
	if _, err := os.Stat(path + ".unreadable"); err != nil {
		t.Errorf("the truncated file was not set aside: %v", err)
	}
	c := &agentapi.Client{Socket: n.env["VPCNET_SOCKET"]}
	if _, err := c.Add(context.Background(), &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "web", PortMappings: port8080}); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidPortMappingsAreRefusedBeforeAnAddressIsTaken(t *testing.T) {
	_, _, c := servingNode(t, nil)
	ctx := context.Background()
	_, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "web",
		PortMappings: []agentapi.PortMapping{{HostPort: 0, ContainerPort: 80}}})
	if agentapi.CodeOf(err) != agentapi.InvalidArgument || !strings.Contains(err.Error(), "hostPort 0") {
		t.Fatalf("Add with hostPort 0 = %v, want InvalidArgument naming it", err)
	}
	if _, err := c.Check(ctx, &agentapi.CheckRequest{Attachment: web("c1")}); agentapi.CodeOf(err) != agentapi.NotFound {
		t.Errorf("a refused Add holds an address (Check = %v)", err)
	}
}

// A pod whose DEL never came (the runtime lost it, or the agent was down
// and its restart reclaimed the address) loses its hostPorts at the next
// sweep, on the agent's clock.
func TestHostPortsOfAnAddressThePoolNoLongerHoldsAreSweptAway(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ports := &fakePorts{wrote: make(chan struct{}, 1)}
	k := newHostPortKeeper(filepath.Join(t.TempDir(), "hostports.json"), ports, testlog.New(t, slog.LevelWarn), clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	live := map[string]bool{"kept": true, "lost": true}
	sweep := func(es []hostport.Entry) map[ipam.Key]bool {
		mu.Lock()
		defer mu.Unlock()
		out := map[ipam.Key]bool{}
		for _, e := range es {
			out[e.Key] = live[e.Key.ContainerID]
		}
		return out
	}
	done := make(chan struct{})
	go func() { k.run(ctx, sweep); close(done) }()
	defer func() { cancel(); <-done }()
	for i, c := range []string{"kept", "lost"} {
		as := ipam.Assignment{Key: ipam.Key{Network: "aws-cni", ContainerID: c, IfName: "eth0"}, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(20 + i)})}
		if err := k.put(ctx, as, []hostport.Mapping{{HostPort: uint16(8080 + i), ContainerPort: 80, Protocol: hostport.TCP}}); err != nil {
			t.Fatal(err)
		}
	}
	<-ports.wrote
	mu.Lock()
	live["lost"] = false
	mu.Unlock()
	clk.Advance(hostPortSweep - time.Second)
	if got := ports.rules(); len(got) != 2 {
		t.Fatalf("rules before the sweep is due = %v, want both", got)
	}
	clk.Advance(time.Second)
	select {
	case <-ports.wrote:
	case <-time.After(10 * time.Second):
		t.Fatalf("no sweep a minute after the address went; rules %v", ports.rules())
	}
	if got := ports.rules(); len(got) != 1 || got[0] != "10.0.0.20 *:8080/tcp->80" {
		t.Errorf("the sweep left %v, want only the live pod's", got)
	}
}
