package fabric

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

// Two nodes in two dual-stack subnets of one VPC; each primary ENI gets an
// IPv6 address on creation, as an EKS IPv6 node's does.
const dualStackTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:de00::/56'}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24, ipv6Cidr: '2600:1f14:abc:de01::/64', assignIpv6AddressOnCreation: true}
  - {id: subnet-b, az: us-west-2a, cidr: 10.0.1.0/24, ipv6Cidr: '2600:1f14:abc:de02::/64', assignIpv6AddressOnCreation: true}
securityGroups: [sg-0sim]
instances:
  - {id: i-node1, type: m5.large, subnet: subnet-a}
  - {id: i-node2, type: m5.large, subnet: subnet-b}
throttle: {disabled: true}
seed: 1
`

// node6 is one node of the dual-stack world as a test uses it.
type node6 struct {
	id, eni string
	mac     net.HardwareAddr
	path    string
	nl      *netlink.Handle
	// addr is the address EC2 gave the primary ENI on creation, which
	// the fabric configured on eth0 as DHCPv6 would.
	addr netip.Addr
	// prefix is the /80 assigned through AssignIpv6Addresses, and pod an
	// address of it on the node's loopback, standing for a pod.
	prefix netip.Prefix
	pod    netip.Addr
}

type world6 struct {
	t      *testing.T
	ctx    context.Context
	f      *Fabric
	ec2    *ec2.Client
	router *netlink.Handle
	n1, n2 *node6
}

// startWorld starts a fabric on a cloud made from topology.
func startWorld(t *testing.T, topology string) (*world6, *sim.Cloud) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	simtest.IsolateAWSEnv(t)
	clock := sim.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cloud := simtest.New(t, topology, sim.Options{Now: clock.Now, AfterFunc: clock.AfterFunc})
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f, err := start(ctx, cloud, Options{Prefix: "vpcnet-f6" + hex.EncodeToString(b) + "-"}, mirrorHooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fabric: %v", err)
		}
	})
	w := &world6{t: t, ctx: ctx, f: f, ec2: simtest.EC2Client(cloud.EC2Handler(), "AKIDSIM")}
	w.router = handleAt(t, f.RouterNS())
	return w, cloud
}

// startDualStack starts the fabric on the dual-stack cloud, assigns each
// node's primary ENI a /80 through the EC2 API, waits until the router
// routes them and puts a pod stand-in address from each on the node.
func startDualStack(t *testing.T) *world6 {
	t.Helper()
	w, cloud := startWorld(t, dualStackTopology)
	w.n1, w.n2 = w.node(cloud, "i-node1"), w.node(cloud, "i-node2")
	for _, n := range []*node6{w.n1, w.n2} {
		out, err := w.ec2.AssignIpv6Addresses(w.ctx, &ec2.AssignIpv6AddressesInput{
			NetworkInterfaceId: aws.String(n.eni), Ipv6PrefixCount: aws.Int32(1),
		})
		if err != nil {
			t.Fatal(err)
		}
		n.prefix = netip.MustParsePrefix(out.AssignedIpv6Prefixes[0])
		n.pod = n.prefix.Addr().Next().Next().Next().Next().Next() // ::5
	}
	for _, n := range []*node6{w.n1, w.n2} {
		w.awaitRouted(n.prefix, true)
		w.addLocal(n, n.pod)
	}
	return w
}

func (w *world6) node(cloud *sim.Cloud, id string) *node6 {
	w.t.Helper()
	ifs, err := cloud.Interfaces(id)
	if err != nil {
		w.t.Fatal(err)
	}
	if len(ifs) != 1 {
		w.t.Fatalf("%s: want one ENI, got %+v", id, ifs)
	}
	mac, err := net.ParseMAC(ifs[0].MAC)
	if err != nil {
		w.t.Fatal(err)
	}
	path, _ := w.f.NodeNS(id)
	n := &node6{id: id, eni: ifs[0].ID, mac: mac, path: path, nl: handleAt(w.t, path)}
	if len(ifs[0].IPv6Addresses) > 0 {
		n.addr = ifs[0].IPv6Addresses[0]
	}
	return n
}

func handleAt(t *testing.T, path string) *netlink.Handle {
	t.Helper()
	ns, err := nsHandle(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// addLocal gives the node an address on its loopback, as a pod's address
// is local to its node, and waits until the kernel has made it usable.
func (w *world6) addLocal(n *node6, a netip.Addr) {
	w.t.Helper()
	lo, err := n.nl.LinkByName("lo")
	if err != nil {
		w.t.Fatal(err)
	}
	if err := addrNoDAD(n.nl, lo, netip.PrefixFrom(a, 128)); err != nil {
		w.t.Fatalf("%s: address %s: %v", n.id, a, err)
	}
	if err := settled6(n.nl, lo, []netip.Addr{a}, false); err != nil {
		w.t.Fatal(err)
	}
}

// awaitMirrored waits until cond holds, checking it again after each EC2
// change the fabric finishes mirroring: routes are in the kernel before
// the fabric says the change is mirrored, so no wake-up is missed.
func awaitMirrored(ctx context.Context, f *Fabric, cond func() (bool, error)) error {
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fabric: %v: %w", f.Err(), ctx.Err())
		}
	}
}

// awaitRouted waits until the router has (or no longer has) a route to p
// over an ENI's wire.
func (w *world6) awaitRouted(p netip.Prefix, want bool) {
	w.t.Helper()
	err := awaitMirrored(w.ctx, w.f, func() (bool, error) {
		routes, err := whole(func() ([]netlink.Route, error) { return w.router.RouteList(nil, netlink.FAMILY_V6) })
		if err != nil {
			return false, err
		}
		for _, r := range routes {
			if r.Dst != nil && r.Dst.String() == p.String() && r.LinkIndex != 0 {
				return want, nil
			}
		}
		return !want, nil
	})
	if err != nil {
		w.t.Fatalf("waiting for the router to route %s: %t: %v", p, want, err)
	}
}

// echoServer accepts connections on the namespace's addr and answers each
// with the remote address it saw, so a client can tell no NAT is on the
// way.
func echoServer(t *testing.T, path string, addr netip.Addr) netip.AddrPort {
	t.Helper()
	ln, err := Listen(path, "tcp6", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s\n", c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr())
			c.Close()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// connect opens a TCP connection from src in the namespace to dst and
// returns the source address the server saw.
func connect(ctx context.Context, path string, src netip.Addr, dst netip.AddrPort) (netip.Addr, error) {
	var conn net.Conn
	err := Do(path, func() error {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
		var err error
		conn, err = d.DialContext(ctx, "tcp6", dst.String())
		return err
	})
	if err != nil {
		return netip.Addr{}, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return netip.Addr{}, fmt.Errorf("read from %s: %w", dst, err)
	}
	return netip.ParseAddr(strings.TrimSpace(line))
}

func (w *world6) mustConnect(what, path string, src netip.Addr, dst netip.AddrPort) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 20*time.Second)
	defer cancel()
	seen, err := connect(ctx, path, src, dst)
	if err != nil {
		w.t.Fatalf("%s: %s -> %s: %v (fabric: %v)", what, src, dst, err, w.f.Err())
	}
	if seen != src {
		w.t.Errorf("%s: the server saw the connection come from %s, want %s (no NAT on the way)", what, seen, src)
	}
}

func TestIPv6NodesAndPodsReachEachOtherAndTheInternetThroughTheRouter(t *testing.T) {
	w := startDualStack(t)
	n1, n2 := w.n1, w.n2
	if !n1.addr.IsValid() || !n2.addr.IsValid() {
		t.Fatal("a node's primary ENI got no IPv6 address on creation")
	}
	n2node := echoServer(t, n2.path, n2.addr)
	n2pod := echoServer(t, n2.path, n2.pod)
	inet := echoServer(t, w.f.InternetNS(), InternetAddr6)
	n1pod := echoServer(t, n1.path, n1.pod)

	// A node's /128 (from the subnet, assigned on creation) to another
	// node's, across subnets.
	w.mustConnect("node to node", n1.path, n1.addr, n2node)
	// A pod address of one node's /80 to one of the other's, both ways.
	w.mustConnect("pod to pod", n1.path, n1.pod, n2pod)
	w.mustConnect("pod to pod, back", n2.path, n2.pod, n1pod)
	// Egress to the internet with the pod's own global address, no NAT66,
	// and in from the internet to a pod.
	w.mustConnect("pod to internet", n1.path, n1.pod, inet)
	w.mustConnect("node to internet", n2.path, n2.addr, inet)
	w.mustConnect("internet to pod", w.f.InternetNS(), InternetAddr6, n2pod)

	// The node found its gateway by neighbour discovery, not a static
	// entry: fe80::1 on eth0 resolves to the router end of its wire.
	eth0, err := n1.nl.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	wire, err := w.router.LinkByName("n0e0")
	if err != nil {
		t.Fatal(err)
	}
	neighs, err := n1.nl.NeighList(eth0.Attrs().Index, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	learned := false
	for _, nb := range neighs {
		if nb.IP.Equal(routerLinkLocal.AsSlice()) {
			learned = nb.State&netlink.NUD_PERMANENT == 0 && nb.HardwareAddr.String() == wire.Attrs().HardwareAddr.String()
			t.Logf("node1's neighbour fe80::1: %s state %#x", nb.HardwareAddr, nb.State)
		}
	}
	if !learned {
		t.Errorf("node1 has no learned neighbour entry for fe80::1 with the router's MAC %s: %v", wire.Attrs().HardwareAddr, neighs)
	}
	// The /80's next hop is the address the kernel itself gives the node.
	addrs, err := n1.nl.AddrList(eth0, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	ll := eui64LinkLocal(n1.mac)
	found := false
	for _, a := range addrs {
		found = found || a.IP.Equal(ll.AsSlice())
	}
	if !found {
		t.Errorf("node1's eth0 has no link-local %s (has %v)", ll, addrs)
	}
	if err := w.f.Err(); err != nil {
		t.Error(err)
	}
}

// udpSink receives datagrams on every address of the namespace.
func udpSink(t *testing.T, path string) (*net.UDPConn, int) {
	t.Helper()
	var c *net.UDPConn
	err := Do(path, func() error {
		var err error
		c, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, c.LocalAddr().(*net.UDPAddr).Port
}

// datagram is one UDP datagram to send from a node.
type datagram struct {
	src, dst netip.Addr
	body     string
}

// send sends the datagrams in order from one thread inside the namespace.
func send(path string, port int, ds ...datagram) error {
	return Do(path, func() error {
		for _, d := range ds {
			c, err := net.DialUDP("udp6", &net.UDPAddr{IP: d.src.AsSlice()}, &net.UDPAddr{IP: d.dst.AsSlice(), Port: port})
			if err != nil {
				return fmt.Errorf("%s -> %s: %w", d.src, d.dst, err)
			}
			_, err = c.Write([]byte(d.body))
			c.Close()
			if err != nil {
				return fmt.Errorf("%s -> %s: %w", d.src, d.dst, err)
			}
		}
		return nil
	})
}

// receivedBefore reads the sink until the datagram marker arrives and
// returns the bodies that came before it. The marker, sent last on the
// same path, stands for "everything sent earlier has been through the
// router": a datagram the router let through would have arrived first.
func receivedBefore(t *testing.T, c *net.UDPConn, marker string) []string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var got []string
	buf := make([]byte, 512)
	for {
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("the marker %q never arrived (before it: %v): %v", marker, got, err)
		}
		if string(buf[:n]) == marker {
			return got
		}
		got = append(got, fmt.Sprintf("%s from %s", buf[:n], from.IP))
	}
}

// sourceCheckDrops reads the packet counter of the router's IPv6
// source/destination check.
func sourceCheckDrops(t *testing.T, routerPath string) uint64 {
	t.Helper()
	h, err := nsHandle(routerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		t.Fatal(err)
	}
	tbl := &nftables.Table{Family: nftables.TableFamilyIPv6, Name: srcCheckTable}
	rules, err := c.GetRules(tbl, &nftables.Chain{Name: srcCheckChain, Table: tbl})
	if err != nil {
		t.Fatalf("the router's source check: %v", err)
	}
	for _, r := range rules {
		for _, e := range r.Exprs {
			if ctr, ok := e.(*expr.Counter); ok {
				return ctr.Packets
			}
		}
	}
	t.Fatalf("the router's source check has no counter: %v", rules)
	return 0
}

func TestIPv6SpoofedSourcesAreDroppedByTheRouter(t *testing.T) {
	w := startDualStack(t)
	n1, n2 := w.n1, w.n2
	sink2, port := udpSink(t, n2.path)
	inetSink, inetPort := udpSink(t, w.f.InternetNS())
	if port == inetPort {
		t.Skip("both sinks got the same port; the datagrams below need one port each")
	}

	// Allowed: sources EC2 assigned to node1's ENI, its /128 and an
	// address of its /80.
	if err := send(n1.path, port, datagram{n1.addr, n2.addr, "from-addr"}, datagram{n1.pod, n2.pod, "from-pod"}, datagram{n1.addr, n2.addr, "marker-1"}); err != nil {
		t.Fatal(err)
	}
	if got := receivedBefore(t, sink2, "marker-1"); len(got) != 2 {
		t.Fatalf("node2 received %v before the marker, want the datagrams from node1's address and pod", got)
	}

	before := sourceCheckDrops(t, w.f.RouterNS())
	// Spoofed: an address of node1's subnet that EC2 never assigned, and
	// node2's own address, which the VPC routes to another ENI. Node1
	// holds both so its kernel lets it send from them.
	unassigned := n1.addr.Next().Next().Next()
	w.addLocal(n1, unassigned)
	if err := send(n1.path, port, datagram{unassigned, n2.pod, "spoofed-unassigned"}, datagram{n1.addr, n2.pod, "marker-2"}); err != nil {
		t.Fatal(err)
	}
	if got := receivedBefore(t, sink2, "marker-2"); len(got) != 0 {
		t.Errorf("node2 received %v from a source EC2 never assigned to node1's ENI", got)
	}
	w.addLocal(n1, n2.addr) // from now on node1 sends nothing to node2's address
	if err := send(n1.path, inetPort, datagram{n2.addr, InternetAddr6, "spoofed-other-eni"}, datagram{n1.addr, InternetAddr6, "marker-3"}); err != nil {
		t.Fatal(err)
	}
	if got := receivedBefore(t, inetSink, "marker-3"); len(got) != 0 {
		t.Errorf("the internet received %v, sent by node1 from node2's address", got)
	}
	// The drops are the source check's, not a missing route's. The
	// counter is the kernel's own state, which may trail the marker by a
	// softirq, so it is polled until a deadline.
	for sourceCheckDrops(t, w.f.RouterNS())-before < 2 {
		select {
		case <-w.ctx.Done():
			t.Fatalf("the source check counted %d drops, want 2", sourceCheckDrops(t, w.f.RouterNS())-before)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := w.f.Err(); err != nil {
		t.Error(err)
	}
}

func TestIPv6UnassignedAddressesAndPrefixesStopBeingRouted(t *testing.T) {
	w := startDualStack(t)
	n1, n2 := w.n1, w.n2
	out, err := w.ec2.AssignIpv6Addresses(w.ctx, &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(n2.eni), Ipv6AddressCount: aws.Int32(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	extra := netip.MustParseAddr(out.AssignedIpv6Addresses[0])
	w.awaitRouted(netip.PrefixFrom(extra, 128), true)
	w.addLocal(n2, extra)
	sink, port := udpSink(t, n2.path)

	if err := send(n1.path, port, datagram{n1.addr, extra, "to-extra"}, datagram{n1.addr, n2.pod, "to-pod"}, datagram{n1.addr, n2.addr, "marker-1"}); err != nil {
		t.Fatal(err)
	}
	if got := receivedBefore(t, sink, "marker-1"); len(got) != 2 {
		t.Fatalf("before the unassign node2 received %v, want the datagrams to its extra address and its pod", got)
	}

	if _, err := w.ec2.UnassignIpv6Addresses(w.ctx, &ec2.UnassignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(n2.eni), Ipv6Addresses: []string{extra.String()}, Ipv6Prefixes: []string{n2.prefix.String()},
	}); err != nil {
		t.Fatal(err)
	}
	w.awaitRouted(netip.PrefixFrom(extra, 128), false)
	w.awaitRouted(n2.prefix, false)
	neighs, err := whole(func() ([]netlink.Neigh, error) { return w.router.NeighList(0, netlink.FAMILY_V6) })
	if err != nil {
		t.Fatal(err)
	}
	for _, nb := range neighs {
		if nb.IP.Equal(extra.AsSlice()) {
			t.Errorf("the router keeps a neighbour entry for the unassigned %s: %+v", extra, nb)
		}
	}
	// Node2 still holds both addresses locally, so only the router can be
	// what stops the datagrams.
	if err := send(n1.path, port, datagram{n1.addr, extra, "to-extra"}, datagram{n1.addr, n2.pod, "to-pod"}, datagram{n1.addr, n2.addr, "marker-2"}); err != nil {
		t.Fatal(err)
	}
	if got := receivedBefore(t, sink, "marker-2"); len(got) != 0 {
		t.Errorf("after the unassign node2 still received %v", got)
	}
	if err := w.f.Err(); err != nil {
		t.Error(err)
	}
}

// An IPv4-only VPC made dual stack while the fabric runs: a VPC block
// associated at run time, a subnet given a /64 of it, an address assigned
// to a node that booted without IPv6.
const lateIPv6Topology = `
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

func TestIPv6AddedToARunningVPCIsRoutedBothWays(t *testing.T) {
	w, cloud := startWorld(t, lateIPv6Topology)
	n := w.node(cloud, "i-node1")
	if _, err := w.ec2.AssociateVpcCidrBlock(w.ctx, &ec2.AssociateVpcCidrBlockInput{
		VpcId: aws.String("vpc-0sim"), AmazonProvidedIpv6CidrBlock: aws.Bool(true),
	}); err != nil {
		t.Fatal(err)
	}
	vpcs, err := w.ec2.DescribeVpcs(w.ctx, &ec2.DescribeVpcsInput{VpcIds: []string{"vpc-0sim"}})
	if err != nil {
		t.Fatal(err)
	}
	block := netip.MustParsePrefix(aws.ToString(vpcs.Vpcs[0].Ipv6CidrBlockAssociationSet[0].Ipv6CidrBlock))
	subnet := netip.PrefixFrom(block.Addr(), 64)
	if _, err := w.ec2.AssociateSubnetCidrBlock(w.ctx, &ec2.AssociateSubnetCidrBlockInput{
		SubnetId: aws.String("subnet-a"), Ipv6CidrBlock: aws.String(subnet.String()),
	}); err != nil {
		t.Fatal(err)
	}
	out, err := w.ec2.AssignIpv6Addresses(w.ctx, &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(n.eni), Ipv6AddressCount: aws.Int32(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr(out.AssignedIpv6Addresses[0])
	w.awaitRouted(netip.PrefixFrom(addr, 128), true)
	// The instance's OS would configure it from DHCPv6; the fabric does
	// only at boot, so the test does it here.
	w.addLocal(n, addr)
	inet := echoServer(t, w.f.InternetNS(), InternetAddr6)
	w.mustConnect("node to internet", n.path, addr, inet)
	node := echoServer(t, n.path, addr)
	w.mustConnect("internet to node", w.f.InternetNS(), InternetAddr6, node)
	if err := w.f.Err(); err != nil {
		t.Error(err)
	}
}

func TestEUI64LinkLocalIsLinuxs(t *testing.T) {
	mac, _ := net.ParseMAC("0a:1b:2c:3d:4e:5f")
	if got, want := eui64LinkLocal(mac), netip.MustParseAddr("fe80::81b:2cff:fe3d:4e5f"); got != want {
		t.Errorf("eui64LinkLocal(%s) = %s, want %s", mac, got, want)
	}
}
