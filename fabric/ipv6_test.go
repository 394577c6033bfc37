package fabric

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/vishvananda/netlink"
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
