package fabric

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vpcnet/vpcnet/sim"
)

// IPv6 in the fabric follows what an instance sees of a dual-stack VPC:
//
//   - The VPC router answers at the link-local fe80::1 on every ENI of a
//     dual-stack subnet, and an instance's IPv6 default route points
//     there. aws-node's IPv6 mode leaves the node's default route alone
//     and sends its pods' traffic by it. (A real instance learns its
//     gateway from the VPC's router advertisements, which the fabric does
//     not send; that the address is fe80::1 is taken from the brief of
//     issue 27, not checked against a VPC.)
//   - Every IPv6 address EC2 assigns to an ENI is a /128 route over the
//     ENI's wire with a permanent neighbour entry to the ENI's MAC, as for
//     IPv4: the VPC never asks an instance who has an address.
//   - Every /80 prefix is one route over the wire to a next hop that is
//     the ENI's MAC (the router knows it by the node's EUI-64 link-local
//     address, a permanent entry): the VPC hands the whole prefix to the
//     ENI, and the node delivers within it (aws-node by a route per pod).
//   - The VPC's /56 is the router's "local" route: a destination in it
//     that no ENI holds is dropped, not sent to the internet.
//   - Source/destination checking drops a forwarded packet whose source is
//     not routed back over the wire it came in on (nftables, below:
//     rp_filter is IPv4 only).
//   - Addresses are added without duplicate address detection: EC2 gives
//     each address to one ENI, so there is nothing to detect, and the
//     kernel would otherwise hold each one unusable ("tentative") for a
//     second, failing a test's first packet.

var (
	// routerLinkLocal is the VPC router's IPv6 address on each ENI's link.
	routerLinkLocal = netip.MustParseAddr("fe80::1")
	// internetNet6 is the IPv6 link between the router and the internet
	// namespace: documentation space (RFC 3849), outside every VPC.
	internetNet6 = netip.MustParsePrefix("2001:db8:100::/64")
	routerSide6  = netip.MustParseAddr("2001:db8:100::1")
	// InternetAddr6 is the IPv6 address of the host standing for the
	// internet. A pod with a global address from its node's /80 reaches it
	// directly, as EKS IPv6 pods egress with no NAT.
	InternetAddr6 = netip.MustParseAddr("2001:db8:100::10")
)

// vpcIPv6Bits is the size of every Amazon-provided VPC IPv6 block; a
// subnet's /64 always lies in one, so the block is the /64 cut to /56.
const vpcIPv6Bits = 56

// routerSysctls make the router a router for both families whose links
// never hold an address tentative (see the note on DAD above). The kernel
// applies the larger of "all" and a link's own accept_dad, so both are
// set; links made later take "default".
func routerSysctls() map[string]string {
	return map[string]string{
		"net.ipv4.ip_forward":              "1",
		"net.ipv6.conf.all.forwarding":     "1",
		"net.ipv6.conf.default.forwarding": "1",
		"net.ipv6.conf.all.accept_dad":     "0",
		"net.ipv6.conf.default.accept_dad": "0",
	}
}

// wireInternet6 gives the router-internet link its IPv6 addresses and the
// router its default route: the VPC's route table sends ::/0 to the
// internet gateway. The internet's routes back to each VPC /56 are added
// as ENIs of dual-stack subnets appear (vpcBlock6).
func (f *Fabric) wireInternet6() error {
	nodad := func(nl *netlink.Handle, link string, a netip.Addr) error {
		l, err := nl.LinkByName(link)
		if err != nil {
			return err
		}
		if err := addrNoDAD(nl, l, netip.PrefixFrom(a, internetNet6.Bits())); err != nil {
			return err
		}
		return settled6(nl, l, []netip.Addr{a}, false)
	}
	if err := nodad(f.router.nl, "inet0", routerSide6); err != nil {
		return fmt.Errorf("router side of the internet link: %w", err)
	}
	if err := nodad(f.internet.nl, "eth0", InternetAddr6); err != nil {
		return fmt.Errorf("internet side of its link: %w", err)
	}
	def := &netlink.Route{Dst: ipNet(netip.MustParsePrefix("::/0")), Gw: InternetAddr6.AsSlice()}
	if err := f.router.nl.RouteReplace(def); err != nil {
		return fmt.Errorf("router's IPv6 default route: %w", err)
	}
	return nil
}

// vpcBlock6 makes sure the VPC /56 holding subnet is routed: locally on
// the router (a blackhole under the ENIs' more specific routes) and back
// from the internet. Blocks associated after Start are found this way too.
func (f *Fabric) vpcBlock6(router *netlink.Handle, subnet netip.Prefix) error {
	block := netip.PrefixFrom(subnet.Addr(), vpcIPv6Bits).Masked()
	f.mu6.Lock()
	defer f.mu6.Unlock()
	if f.vpc6[block] {
		return nil
	}
	if block.Overlaps(internetNet6) {
		return fmt.Errorf("fabric: VPC IPv6 block %s overlaps the internet stand-in %s", block, internetNet6)
	}
	local := &netlink.Route{Dst: ipNet(block), Type: unix.RTN_BLACKHOLE}
	if err := router.RouteReplace(local); err != nil {
		return fmt.Errorf("router's local route for %s: %w", block, err)
	}
	back := &netlink.Route{Dst: ipNet(block), Gw: routerSide6.AsSlice()}
	if err := f.internet.nl.RouteReplace(back); err != nil {
		return fmt.Errorf("internet's route to %s: %w", block, err)
	}
	f.vpc6[block] = true
	return nil
}

// gateway6 makes the router end of an ENI's wire the subnet's IPv6
// router: fe80::1 on it, and the node's link-local next hop that /80
// prefixes are routed to.
func (w *wiredENI) gateway6(nl *netlink.Handle) error {
	l, err := nl.LinkByName(w.routerLink)
	if err != nil {
		return fmt.Errorf("wire %s: %w", w.routerLink, err)
	}
	if err := addrNoDAD(nl, l, netip.PrefixFrom(routerLinkLocal, 64)); err != nil {
		return fmt.Errorf("gateway %s on %s: %w", routerLinkLocal, w.routerLink, err)
	}
	// The router answers solicitations for fe80::1 only once it is usable.
	if err := settled6(nl, l, []netip.Addr{routerLinkLocal}, false); err != nil {
		return err
	}
	nb := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V6, State: netlink.NUD_PERMANENT,
		IP: eui64LinkLocal(w.mac).AsSlice(), HardwareAddr: w.mac}
	if err := nl.NeighSet(nb); err != nil {
		return fmt.Errorf("neighbour %s on %s: %w", nb.IP, w.routerLink, err)
	}
	return nil
}

// route6 adds (or removes) the router's routes to an ENI's IPv6 addresses,
// each a /128 with a permanent neighbour entry, and /80 prefixes, each via
// the node's link-local next hop.
func (w *wiredENI) route6(nl *netlink.Handle, addrs []netip.Addr, prefixes []netip.Prefix, add bool) error {
	l, err := nl.LinkByName(w.routerLink)
	if err != nil {
		return fmt.Errorf("wire %s: %w", w.routerLink, err)
	}
	idx := l.Attrs().Index
	var errs []error
	change := func(r *netlink.Route) {
		if add {
			if err := nl.RouteReplace(r); err != nil {
				errs = append(errs, fmt.Errorf("route %s via %s: %w", r.Dst, w.routerLink, err))
			}
		} else if err := nl.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", r.Dst, err))
		}
	}
	for _, a := range addrs {
		change(&netlink.Route{LinkIndex: idx, Dst: ipNet(netip.PrefixFrom(a, 128))})
		nb := &netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V6, State: netlink.NUD_PERMANENT, IP: a.AsSlice(), HardwareAddr: w.mac}
		if add {
			if err := nl.NeighSet(nb); err != nil {
				errs = append(errs, fmt.Errorf("neighbour %s: %w", a, err))
			}
		} else if err := nl.NeighDel(nb); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete neighbour %s: %w", a, err))
		}
	}
	hop := eui64LinkLocal(w.mac).AsSlice()
	for _, p := range prefixes {
		change(&netlink.Route{LinkIndex: idx, Dst: ipNet(p), Gw: hop})
	}
	return errors.Join(errs...)
}

// mirror6 applies an IPv6 assignment or unassignment to a wired ENI. The
// subnet may have gained its /64 after the wire was laid, so an
// assignment first makes sure the wire and the VPC block are IPv6-ready.
func (f *Fabric) mirror6(l *lane, w *wiredENI, ev sim.Event) error {
	switch ev.Kind {
	case sim.IPv6AddressesAssigned, sim.IPv6PrefixesAssigned:
		if err := f.ready6(l.nl, w, ev); err != nil {
			return err
		}
		return w.route6(l.nl, ev.IPv6Addresses, ev.IPv6Prefixes, true)
	case sim.IPv6AddressesUnassigned, sim.IPv6PrefixesUnassigned:
		return w.route6(l.nl, ev.IPv6Addresses, ev.IPv6Prefixes, false)
	}
	return fmt.Errorf("event kind %q is not an IPv6 change", ev.Kind)
}

// ready6 prepares a wire of a dual-stack subnet for IPv6; for the
// instance's primary interface, once plugged, that includes the default
// route a router advertisement gives the instance.
func (f *Fabric) ready6(nl *netlink.Handle, w *wiredENI, ev sim.Event) error {
	if !ev.SubnetIPv6CIDR.IsValid() {
		return fmt.Errorf("IPv6 change on ENI %s of subnet %s, which has no IPv6 CIDR", ev.NetworkInterfaceID, ev.SubnetID)
	}
	if err := f.vpcBlock6(nl, ev.SubnetIPv6CIDR); err != nil {
		return err
	}
	if err := w.gateway6(nl); err != nil {
		return err
	}
	if primarySlot(ev) {
		if l, err := w.node.nl.LinkByName(nodeLinkName(ev)); err == nil && l.Attrs().Flags&net.FlagUp != 0 {
			return defaultRoute6(w.node, l)
		}
	}
	return nil
}

// bootPrimary6 does for IPv6 what the instance's OS does on its first
// interface in a dual-stack subnet: the default route a router
// advertisement gives (via fe80::1) and the address DHCPv6 leases, a
// /128 (the first IPv6 address EC2 assigned, if any).
func (f *Fabric) bootPrimary6(n *node, link string, ev sim.Event) error {
	if !ev.SubnetIPv6CIDR.IsValid() {
		return nil
	}
	l, err := n.nl.LinkByName(link)
	if err != nil {
		return err
	}
	var addrs []netip.Addr
	if len(ev.IPv6Addresses) > 0 {
		addrs = ev.IPv6Addresses[:1]
		if err := addrNoDAD(n.nl, l, netip.PrefixFrom(addrs[0], 128)); err != nil {
			return fmt.Errorf("configure %s/%s: %w", n.id, link, err)
		}
	}
	if err := defaultRoute6(n, l); err != nil {
		return err
	}
	// The instance is booted once its address works and it can solicit
	// its gateway (from its link-local address), as with IPv4 at once.
	if err := settled6(n.nl, l, addrs, true); err != nil {
		return fmt.Errorf("node %s: %w", n.id, err)
	}
	return nil
}

func defaultRoute6(n *node, l netlink.Link) error {
	def := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("::/0")), Gw: routerLinkLocal.AsSlice()}
	if err := n.nl.RouteReplace(def); err != nil {
		return fmt.Errorf("IPv6 default route of %s: %w", n.id, err)
	}
	return nil
}

func primarySlot(ev sim.Event) bool { return ev.NetworkCardIndex == 0 && ev.DeviceIndex == 0 }
