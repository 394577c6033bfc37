package fabric

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

// One node with room for three ENIs, attaching after attachDelay on the
// test's manual clock and detaching at once.
const mirrorTopology = `
attachDelay: %s
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}
securityGroups: [sg-0sim]
instances:
  - {id: i-node1, type: m5.large, subnet: subnet-a}
throttle: {disabled: true}
seed: 1
`

type mirrorEnv struct {
	t     *testing.T
	ctx   context.Context
	f     *Fabric
	ec2   *ec2.Client
	clock *sim.ManualClock
	// node and router are netlink handles of the test's own, so that a
	// check never queues behind the fabric's requests.
	node, router *netlink.Handle
}

// startMirror starts a fabric on a fresh cloud whose attaches take
// attachDelay, with hooks installed before the first event is mirrored.
func startMirror(t *testing.T, attachDelay time.Duration, hooks mirrorHooks) *mirrorEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	simtest.IsolateAWSEnv(t)
	clock := sim.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cloud := simtest.New(t, fmt.Sprintf(mirrorTopology, attachDelay), sim.Options{Now: clock.Now, AfterFunc: clock.AfterFunc})
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f, err := start(ctx, cloud, Options{Prefix: "vpcnet-fm" + hex.EncodeToString(b) + "-"}, hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fabric: %v", err)
		}
	})
	e := &mirrorEnv{t: t, ctx: ctx, f: f, clock: clock, ec2: simtest.EC2Client(cloud.EC2Handler(), "AKIDSIM")}
	nodePath, _ := f.NodeNS("i-node1")
	e.node, e.router = e.handle(nodePath), e.handle(f.RouterNS())
	return e
}

func (e *mirrorEnv) handle(path string) *netlink.Handle {
	e.t.Helper()
	ns, err := nsHandle(path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(h.Close)
	return h
}

// attachENI creates an ENI with n secondary addresses and attaches it at
// device; it returns the ENI's ID, MAC and addresses.
func (e *mirrorEnv) attachENI(device int32, n int32) (string, net.HardwareAddr, []netip.Addr) {
	e.t.Helper()
	out, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(n),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	eni := out.NetworkInterface
	var addrs []netip.Addr
	for _, a := range eni.PrivateIpAddresses {
		addrs = append(addrs, netip.MustParseAddr(aws.ToString(a.PrivateIpAddress)))
	}
	mac, err := net.ParseMAC(aws.ToString(eni.MacAddress))
	if err != nil {
		e.t.Fatal(err)
	}
	e.attachAt(aws.ToString(eni.NetworkInterfaceId), device)
	return aws.ToString(eni.NetworkInterfaceId), mac, addrs
}

func (e *mirrorEnv) attachAt(id string, device int32) string {
	e.t.Helper()
	out, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(id), InstanceId: aws.String("i-node1"), DeviceIndex: aws.Int32(device),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return aws.ToString(out.AttachmentId)
}

// whole is a netlink dump read again while the kernel says a concurrent
// change interrupted it (ErrDumpInterrupted, with partial results): the
// fabric changes the router's routes while a test reads them.
func whole[T any](list func() ([]T, error)) ([]T, error) {
	for attempt := 1; ; attempt++ {
		v, err := list()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || attempt == 10 {
			return v, err
		}
	}
}

// plugged reports whether the node has an interface with the ENI's MAC:
// what the agent looks for.
func (e *mirrorEnv) plugged(mac net.HardwareAddr) bool {
	e.t.Helper()
	links, err := whole(e.node.LinkList)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, l := range links {
		if l.Attrs().HardwareAddr.String() == mac.String() {
			return true
		}
	}
	return false
}

// waitPlugged waits for the ENI's interface to appear in the node.
func (e *mirrorEnv) waitPlugged(mac net.HardwareAddr) {
	e.t.Helper()
	for !e.plugged(mac) {
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("no interface with MAC %s appeared in the node (fabric: %v)", mac, e.f.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// unrouted lists the addresses the router has no route for.
func (e *mirrorEnv) unrouted(addrs []netip.Addr) []netip.Addr {
	e.t.Helper()
	routes, err := whole(func() ([]netlink.Route, error) { return e.router.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		e.t.Fatal(err)
	}
	have := map[netip.Prefix]bool{}
	for _, r := range routes {
		if r.Dst != nil {
			a, _ := netip.AddrFromSlice(r.Dst.IP.To4())
			ones, _ := r.Dst.Mask.Size()
			have[netip.PrefixFrom(a, ones)] = true
		}
	}
	var missing []netip.Addr
	for _, a := range addrs {
		if !have[netip.PrefixFrom(a, 32)] {
			missing = append(missing, a)
		}
	}
	return missing
}

// gate holds the fabric at a hook until released.
type gate struct {
	reached chan sim.Event
	release chan struct{}
}

func newGate() *gate { return &gate{reached: make(chan sim.Event, 1), release: make(chan struct{})} }

// hold blocks the fabric's lane on events match picks.
func (g *gate) hold(match func(sim.Event) bool) func(sim.Event) {
	return func(ev sim.Event) {
		if match(ev) {
			g.reached <- ev
			<-g.release
		}
	}
}

func (g *gate) wait(t *testing.T) sim.Event {
	t.Helper()
	select {
	case ev := <-g.reached:
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("the fabric never reached the hook")
	}
	return sim.Event{}
}

func onDevice(kind sim.EventKind, device int) func(sim.Event) bool {
	return func(ev sim.Event) bool { return ev.Kind == kind && ev.DeviceIndex == device }
}

func TestAnENIsWireIsLaidDuringTheAttachAndPluggedInWhenItCompletes(t *testing.T) {
	e := startMirror(t, time.Minute, mirrorHooks{})
	_, mac, addrs := e.attachENI(1, 9)
	for len(e.unrouted(addrs)) > 0 {
		select {
		case <-e.ctx.Done():
			t.Fatalf("the router never routed %v while the ENI attached (fabric: %v)", e.unrouted(addrs), e.f.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if e.plugged(mac) {
		t.Errorf("the node has the ENI's interface (MAC %s) before its attach completed", mac)
	}
	e.clock.Advance(time.Minute)
	e.waitPlugged(mac)
	if err := e.f.Err(); err != nil {
		t.Error(err)
	}
}

func TestAnENIsInterfaceAppearsOnlyOnceTheRouterRoutesItsAddresses(t *testing.T) {
	g := newGate()
	e := startMirror(t, 0, mirrorHooks{beforeRoutes: g.hold(onDevice(sim.ENIAttaching, 1))})
	_, mac, addrs := e.attachENI(1, 9)
	g.wait(t)
	if e.plugged(mac) {
		t.Errorf("the node has an interface with the ENI's MAC %s while the router routes none of its addresses", mac)
	}
	close(g.release)
	e.waitPlugged(mac)
	if missing := e.unrouted(addrs); len(missing) > 0 {
		t.Errorf("the ENI's interface appeared with %v not routed", missing)
	}
	if err := e.f.Err(); err != nil {
		t.Error(err)
	}
}

func TestASlowENIDoesNotHoldUpTheNodesOthers(t *testing.T) {
	g := newGate()
	e := startMirror(t, 0, mirrorHooks{beforeRoutes: g.hold(onDevice(sim.ENIAttaching, 1))})
	defer close(g.release)
	e.attachENI(1, 9)
	g.wait(t)
	_, mac, addrs := e.attachENI(2, 9)
	e.waitPlugged(mac) // fails after a minute if device 2 waits for device 1
	if missing := e.unrouted(addrs); len(missing) > 0 {
		t.Errorf("device 2's interface appeared with %v not routed", missing)
	}
}

func TestAnENIMovedToAnotherSlotKeepsItsRoutesWhicheverSlotIsMirroredFirst(t *testing.T) {
	g := newGate()
	e := startMirror(t, 0, mirrorHooks{beforeApply: g.hold(onDevice(sim.ENIDetached, 1))})
	id, mac, _ := e.attachENI(1, 1)
	e.waitPlugged(mac)
	out, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{
		AttachmentId: out.NetworkInterfaces[0].Attachment.AttachmentId,
	}); err != nil {
		t.Fatal(err)
	}
	g.wait(t) // slot 1's detach waits while the ENI attaches at slot 2
	e.attachAt(id, 2)
	for {
		if l, err := e.node.LinkByName("eth2"); err == nil && l.Attrs().HardwareAddr.String() == mac.String() {
			break
		}
		select {
		case <-e.ctx.Done():
			t.Fatalf("the ENI never appeared as eth2 (fabric: %v)", e.f.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(g.release)
	assigned, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(id), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	added := netip.MustParseAddr(aws.ToString(assigned.AssignedPrivateIpAddresses[0].PrivateIpAddress))
	wire, err := e.router.LinkByName("n0e2")
	if err != nil {
		t.Fatal(err)
	}
	for {
		routes, err := e.router.RouteGet(added.AsSlice())
		if err == nil && len(routes) > 0 && routes[0].LinkIndex == wire.Attrs().Index && e.f.Err() == nil {
			break
		}
		select {
		case <-e.ctx.Done():
			t.Fatalf("the address assigned after the move is not routed over slot 2's wire (routes %v, err %v; fabric: %v)", routes, err, e.f.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := e.f.Err(); err != nil {
		t.Error(err)
	}
}
