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
