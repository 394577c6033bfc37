package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vpcnet/vpcnet/dataplane"
	"github.com/vpcnet/vpcnet/dataplane/netnstest"
	"github.com/vpcnet/vpcnet/fabric"
)

func TestPodReachesIPv4InternetAsTheNodeAndDelRemovesEverything(t *testing.T) {
	for _, version := range []string{"0.4.0", "1.0.0", "1.1.0"} {
		t.Run(version, func(t *testing.T) {
			w := newWorld(t)
			seen := serveTCP(t, w.internet)
			a, b := w.newPod(), w.newPod()
			ca, cb := w.conf(version, w.entry(nil), a), w.conf(version, w.entry(nil), b)

			res, err := w.add(ca, a)
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			r, err := current.NewResultFromResult(res)
			if err != nil {
				t.Fatal(err)
			}
			hostVeth := dataplane.EgressV4VethName("vpcnet", a.rt.ContainerID, "eth0")
			var names []string
			for _, i := range r.Interfaces {
				names = append(names, i.Name)
			}
			if want := []string{"eni1", "eth0", hostVeth, "v4if0"}; !slices.Equal(names, want) {
				t.Errorf("result interfaces %v, want the previous ones and the egress veth's %v", names, want)
			}
			if len(r.IPs) != 1 || r.IPs[0].Address.IP.To4() != nil {
				t.Errorf("result IPs %v, want the pod's IPv6 address alone (the egress address is the node's business)", r.IPs)
			}
			addrA := podEgressAddr(t, a)
			if addrA != netip.MustParsePrefix("169.254.172.2/22") {
				t.Errorf("pod's v4if0 has %s, want host-local's first address 169.254.172.2/22", addrA)
			}
			if err := w.check(ca, a); err != nil {
				t.Errorf("CHECK: %v", err)
			}
			if _, err := w.add(cb, b); err != nil {
				t.Fatalf("ADD of a second pod: %v", err)
			}
			addrB := podEgressAddr(t, b)
			if addrB.Addr() == addrA.Addr() || !addrB.IsValid() {
				t.Errorf("second pod has %s, want an address of its own", addrB)
			}
			for _, p := range []pod{a, b} {
				if err := talkTCP(p.ns, internetIP+":80"); err != nil {
					t.Fatalf("pod %s to %s: %v", p.rt.ContainerID, internetIP, err)
				}
				if got := <-seen; got != netip.MustParseAddr(nodeIP) {
					t.Errorf("internet host saw pod %s's connection from %s, want the node's %s", p.rt.ContainerID, got, nodeIP)
				}
			}
			w.wantNode(hostVeth, addrA.Addr(), true)
			if flows := w.flowsFrom(addrA.Addr()); flows == 0 {
				t.Errorf("no conntrack entry from %s after its connection: the DEL check below would prove nothing", addrA.Addr())
			}

			for i := range 2 {
				if err := w.del(ca, a); err != nil {
					t.Fatalf("DEL #%d: %v", i+1, err)
				}
			}
			w.wantNode(hostVeth, addrA.Addr(), false)
			if flows := w.flowsFrom(addrA.Addr()); flows != 0 {
				t.Errorf("%d conntrack entries from %s outlive DEL", flows, addrA.Addr())
			}
			if got := podEgressAddr(t, a); got.IsValid() {
				t.Errorf("pod still has %s after DEL", got)
			}
			if got, want := w.allocated(), []string{addrB.Addr().String()}; !slices.Equal(got, want) {
				t.Errorf("host-local holds %v after DEL, want only the second pod's %v", got, want)
			}
			if err := w.check(cb, b); err != nil {
				t.Errorf("CHECK of the second pod after the first's DEL: %v", err)
			}
			if err := talkTCP(b.ns, internetIP+":80"); err != nil {
				t.Errorf("second pod after the first's DEL: %v", err)
			} else if got := <-seen; got != netip.MustParseAddr(nodeIP) {
				t.Errorf("internet host saw %s, want %s", got, nodeIP)
			}
		})
	}
}

// DEL after the runtime removed the namespace: the veth went with it, and
// the SNAT set's comment still leads to the address.
func TestDelAfterTheNamespaceIsGone(t *testing.T) {
	w := newWorld(t)
	p := w.newPod()
	c := w.conf("1.1.0", w.entry(nil), p)
	if _, err := w.add(c, p); err != nil {
		t.Fatal(err)
	}
	addr := podEgressAddr(t, p).Addr()
	hostVeth := dataplane.EgressV4VethName("vpcnet", p.rt.ContainerID, "eth0")
	if err := fabric.DeleteNS(strings.TrimPrefix(p.ns.Path(), "/var/run/netns/")); err != nil {
		t.Fatal(err)
	}
	p.ns.Close()
	// The kernel destroys the namespace, and the veth pair in it, once
	// nothing holds it; the runtime calls DEL after that.
	awaitNoLink(t, w.node, hostVeth)
	if err := w.del(c, p); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	w.wantNode(hostVeth, addr, false)
	if got := w.allocated(); len(got) != 0 {
		t.Errorf("host-local still holds %v", got)
	}
}

// A repeated ADD of a wired attachment fails and leaves the first one's
// wiring and address alone.
func TestRepeatedAddLeavesTheWiredPodAlone(t *testing.T) {
	w := newWorld(t)
	p := w.newPod()
	c := w.conf("1.1.0", w.entry(nil), p)
	if _, err := w.add(c, p); err != nil {
		t.Fatal(err)
	}
	addr := podEgressAddr(t, p)
	if _, err := w.add(c, p); err == nil || !strings.Contains(err.Error(), "duplicate allocation") {
		t.Errorf("second ADD: %v, want host-local's refusal", err)
	}
	if got := w.allocated(); !slices.Equal(got, []string{addr.Addr().String()}) {
		t.Errorf("host-local holds %v, want the first ADD's %s", got, addr.Addr())
	}
	if err := w.check(c, p); err != nil {
		t.Errorf("CHECK after the failed second ADD: %v", err)
	}
}

// GC (CNI 1.1) removes the egress of an attachment the runtime no longer
// lists, here from a runtime that lost its cache, so libcni itself issues
// no DEL: the plugin finds the attachment in its SNAT set.
func TestGCRemovesAttachmentsTheRuntimeNoLongerLists(t *testing.T) {
	w := newWorld(t)
	a, b := w.newPod(), w.newPod()
	for _, p := range []pod{a, b} {
		if _, err := w.add(w.conf("1.1.0", w.entry(nil), p), p); err != nil {
			t.Fatal(err)
		}
	}
	addrA, addrB := podEgressAddr(t, a).Addr(), podEgressAddr(t, b).Addr()
	fresh := libcni.NewCNIConfigWithCacheDir([]string{binDir}, t.TempDir(), nil)
	gc := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: b.rt.ContainerID, IfName: "eth0"}}}
	if err := w.inNode(func(ctx context.Context) error { return fresh.GCNetworkList(ctx, w.conflist(w.entry(nil)), gc) }); err != nil {
		t.Fatalf("GC: %v", err)
	}
	w.wantNode(dataplane.EgressV4VethName("vpcnet", a.rt.ContainerID, "eth0"), addrA, false)
	if got := podEgressAddr(t, a); got.IsValid() {
		t.Errorf("collected pod still has %s", got)
	}
	if got, want := w.allocated(), []string{addrB.String()}; !slices.Equal(got, want) {
		t.Errorf("host-local holds %v after GC, want only the listed pod's %v", got, want)
	}
	w.wantNode(dataplane.EgressV4VethName("vpcnet", b.rt.ContainerID, "eth0"), addrB, true)
	if err := w.check(w.conf("1.1.0", w.entry(nil), b), b); err != nil {
		t.Errorf("CHECK of the listed pod after GC: %v", err)
	}
}

// CHECK names what is missing; here the pod's SNAT element, removed by
// hand, and the host route.
func TestCheckNamesWhatIsBroken(t *testing.T) {
	w := newWorld(t)
	p := w.newPod()
	c := w.conf("1.1.0", w.entry(nil), p)
	if _, err := w.add(c, p); err != nil {
		t.Fatal(err)
	}
	addr := podEgressAddr(t, p).Addr()
	hostVeth := dataplane.EgressV4VethName("vpcnet", p.rt.ContainerID, "eth0")
	netnstest.Do(t, w.node, func() error {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: ipnet(addr.String() + "/32")}, netlink.RT_FILTER_DST)
		if err != nil || len(routes) != 1 {
			return fmt.Errorf("routes to %s: %v, %w", addr, routes, err)
		}
		return netlink.RouteDel(&routes[0])
	})
	err := w.check(c, p)
	if err == nil || !strings.Contains(err.Error(), "main table lacks route "+addr.String()+" dev "+hostVeth) {
		t.Errorf("CHECK after the host route was deleted: %v, want it named", err)
	}
	// A CHECK with another node address finds the rule SNATs elsewhere.
	other := w.conf("1.1.0", w.entry(map[string]any{"nodeIP": "10.0.0.11"}), p)
	if err := w.check(other, p); err == nil || !strings.Contains(err.Error(), "SNATing to 10.0.0.11") {
		t.Errorf("CHECK with another nodeIP: %v, want the rule named", err)
	}
}

func TestBadConfigurationIsRefusedNamingTheFieldAndTheFix(t *testing.T) {
	w := newWorld(t)
	p := w.newPod()
	for _, tt := range []struct {
		set  map[string]any
		want []string
	}{
		{map[string]any{"enabled": "yes"}, []string{`field enabled: "yes"`, `set "true"`}},
		{map[string]any{"nodeIP": nil}, []string{"field nodeIP is empty", "node's primary IPv4 address"}},
		{map[string]any{"nodeIP": "2600:1f14::10"}, []string{"field nodeIP: 2600:1f14::10 is an IPv6 address", "ENABLE_V6_EGRESS", "set the node's primary IPv4 address"}},
		{map[string]any{"mtu": "jumbo"}, []string{`field mtu: "jumbo"`, "576 to 9001"}},
		{map[string]any{"randomizeSNAT": "fully"}, []string{`field randomizeSNAT: "fully"`, `"prng"`, "hashrandom", "none"}},
		{map[string]any{"ifName": "eth1"}, []string{`field ifName: "eth1"`, "v4if0", "remove ifName"}},
		{map[string]any{"ipam": map[string]any{"type": "host-local", "ranges": [][]map[string]string{{{"subnet": "fd00::ac:00/118"}}}}},
			[]string{`field ipam.ranges[0][0].subnet: "fd00::ac:00/118"`, "IPv4 subnet", "169.254.172.0/22"}},
		{map[string]any{"ipam": map[string]any{"ranges": [][]map[string]string{{{"subnet": "169.254.172.0/22"}}}}},
			[]string{"field ipam.type is empty", `"host-local"`}},
		{map[string]any{"nodeIP": 10}, []string{"field nodeIP: a JSON number cannot be a string: give it a string"}},
		{map[string]any{"mtu": []int{9001}}, []string{"field mtu: a JSON array cannot be a string: give it a string"}},
	} {
		err := w.addList(w.conflist(w.entry(tt.set)), p)
		var e *types.Error
		if !errors.As(err, &e) {
			t.Errorf("%v: ADD error %v (%T), want a CNI error", tt.set, err, err)
			continue
		}
		if e.Code != types.ErrInvalidNetworkConfig && e.Code != types.ErrDecodingFailure {
			t.Errorf("%v: CNI error code %d, want %d (invalid configuration)", tt.set, e.Code, types.ErrInvalidNetworkConfig)
		}
		t.Logf("%v: %s", tt.set, e.Msg)
		for _, want := range tt.want {
			if !strings.Contains(e.Msg, want) {
				t.Errorf("%v: error %q lacks %q", tt.set, e.Msg, want)
			}
		}
	}
	if got := w.allocated(); len(got) != 0 {
		t.Errorf("a refused ADD left addresses allocated: %v", got)
	}
	if got := podEgressAddr(t, p); got.IsValid() {
		t.Errorf("a refused ADD wired %s", got)
	}
}

// With enabled "false" (aws-node's IPv4 clusters render it so) the plugin
// passes the result through and wires nothing.
func TestDisabledPassesTheResultThrough(t *testing.T) {
	w := newWorld(t)
	p := w.newPod()
	c := w.conf("1.1.0", w.entry(map[string]any{"enabled": "false", "nodeIP": ""}), p)
	res, err := w.add(c, p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Interfaces) != 2 || len(r.IPs) != 1 {
		t.Errorf("result %v, want the previous one", r)
	}
	if got := podEgressAddr(t, p); got.IsValid() {
		t.Errorf("disabled plugin wired %s", got)
	}
	if err := w.del(c, p); err != nil {
		t.Errorf("DEL: %v", err)
	}
}

// podEgressAddr is v4if0's IPv4 address in p, or invalid.
func podEgressAddr(t *testing.T, p pod) netip.Prefix {
	t.Helper()
	var out netip.Prefix
	netnstest.Do(t, p.ns, func() error {
		l, err := netlink.LinkByName("v4if0")
		var missing netlink.LinkNotFoundError
		if errors.As(err, &missing) {
			return nil
		} else if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		if len(addrs) == 1 {
			a, _ := netip.AddrFromSlice(addrs[0].IP)
			ones, _ := addrs[0].Mask.Size()
			out = netip.PrefixFrom(a.Unmap(), ones)
		}
		return nil
	})
	return out
}

// wantNode checks the node's side of a pod's egress: the host veth, its
// route and the SNAT set's element are all there, or all gone.
func (w *world) wantNode(hostVeth string, addr netip.Addr, present bool) {
	w.t.Helper()
	var haveLink, haveRoute bool
	netnstest.Do(w.t, w.node, func() error {
		l, err := netlink.LinkByName(hostVeth)
		haveLink = err == nil
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: ipnet(addr.String() + "/32")}, netlink.RT_FILTER_DST)
		if err != nil {
			return err
		}
		haveRoute = len(routes) > 0 && (l == nil || routes[0].LinkIndex == l.Attrs().Index)
		return nil
	})
	haveElem := slices.Contains(w.snatSet(), addr)
	if haveLink != present || haveRoute != present || haveElem != present {
		w.t.Errorf("node: host veth %s present %v, route to %s %v, %s in the SNAT set %v; want all %v",
			hostVeth, haveLink, addr, haveRoute, addr, haveElem, present)
	}
}

// snatSet lists the node's SNAT set ip vpcnet-egress-v4 pods.
func (w *world) snatSet() []netip.Addr {
	w.t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(w.node.Fd())))
	if err != nil {
		w.t.Fatal(err)
	}
	t, err := c.ListTableOfFamily(dataplane.EgressV4Table, nftables.TableFamilyIPv4)
	if errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		w.t.Fatal(err)
	}
	set, err := c.GetSetByName(t, "pods")
	if err != nil {
		w.t.Fatal(err)
	}
	elems, err := c.GetSetElements(set)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []netip.Addr
	for _, e := range elems {
		a, _ := netip.AddrFromSlice(e.Key)
		out = append(out, a)
	}
	return out
}

// flowsFrom counts the node's conntrack entries from addr.
func (w *world) flowsFrom(addr netip.Addr) int {
	w.t.Helper()
	var n int
	netnstest.Do(w.t, w.node, func() error {
		flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
		if err != nil {
			return err
		}
		for _, f := range flows {
			if a, _ := netip.AddrFromSlice(f.Forward.SrcIP); a.Unmap() == addr {
				n++
			}
		}
		return nil
	})
	return n
}

func linkIndex(name string) int {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return 0
	}
	return l.Attrs().Index
}

// awaitNoLink waits until the kernel has destroyed link name in n, by
// subscription, not by polling on a timer.
func awaitNoLink(t *testing.T, n ns.NetNS, name string) {
	t.Helper()
	ch := make(chan netlink.LinkUpdate, 16)
	done := make(chan struct{})
	defer close(done)
	nsh := netns.NsHandle(int(n.Fd()))
	if err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{Namespace: &nsh}); err != nil {
		t.Fatal(err)
	}
	exists := false
	netnstest.Do(t, n, func() error { exists = linkIndex(name) != 0; return nil })
	timeout := time.After(10 * time.Second)
	for exists {
		select {
		case u := <-ch:
			if u.Attrs().Name == name && u.Header.Type == unix.RTM_DELLINK {
				exists = false
			}
		case <-timeout:
			t.Fatalf("%s still exists 10s after its namespace was removed", name)
		}
	}
}

// serveTCP accepts connections on internetIP:80 in the namespace at path,
// echoes a line and reports each peer's address.
func serveTCP(t *testing.T, path string) <-chan netip.Addr {
	t.Helper()
	ln, err := fabric.Listen(path, "tcp4", internetIP+":80")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	seen := make(chan netip.Addr, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "echo %s", line)
			c.Close()
			seen <- netip.MustParseAddrPort(c.RemoteAddr().String()).Addr()
		}
	}()
	return seen
}

// talkTCP connects from inside n to addr and checks the echo.
func talkTCP(n ns.NetNS, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := fabric.Dial(ctx, n.Path(), "tcp4", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintln(c, "hello"); err != nil {
		return err
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	if reply != "echo hello\n" {
		return fmt.Errorf("reply %q", reply)
	}
	return nil
}
