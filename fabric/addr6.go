package fabric

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// addrNoDAD adds an address without duplicate address detection (why:
// ipv6.go); settled6 waits until the kernel has made it usable.
func addrNoDAD(nl *netlink.Handle, l netlink.Link, p netip.Prefix) error {
	return nl.AddrReplace(l, &netlink.Addr{IPNet: ipNet(p), Flags: unix.IFA_F_NODAD})
}

// eui64LinkLocal is the link-local address Linux gives an interface with
// this MAC (modified EUI-64, RFC 4291 appendix A): the node's address on
// the wire, which the router uses as the next hop of /80 prefixes.
func eui64LinkLocal(mac net.HardwareAddr) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	b[8], b[9], b[10] = mac[0]^0x02, mac[1], mac[2]
	b[11], b[12] = 0xff, 0xfe
	b[13], b[14], b[15] = mac[3], mac[4], mac[5]
	return netip.AddrFrom16(b)
}

// addrSettle bounds the wait for the kernel to make an address usable.
const addrSettle = 5 * time.Second

// settled6 waits until the kernel has finished adding IPv6 addresses to
// link. Even with DAD off it completes an address on a work queue after
// the request has returned; until then the address is tentative: never a
// source, not answered for in neighbour discovery, and, lacking its local
// route, a packet to it is dropped. With linkLocal it also waits for the
// link-local address the kernel makes as the link comes up, without
// which the node cannot solicit its gateway. This is kernel state that
// settles on its own, so it is polled until a deadline.
func settled6(nl *netlink.Handle, l netlink.Link, addrs []netip.Addr, linkLocal bool) error {
	deadline := time.Now().Add(addrSettle)
	for {
		pending, err := unsettled6(nl, l, addrs, linkLocal)
		if err != nil || pending == "" {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("IPv6 %s on %s still not usable after %v", pending, l.Attrs().Name, addrSettle)
		}
		time.Sleep(time.Millisecond)
	}
}

// unsettled6 names an address settled6 still waits for, or returns "".
func unsettled6(nl *netlink.Handle, l netlink.Link, addrs []netip.Addr, linkLocal bool) (string, error) {
	have, err := nl.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		return "", fmt.Errorf("addresses of %s: %w", l.Attrs().Name, err)
	}
	ready := map[netip.Addr]bool{}
	anyLinkLocal := false
	for _, a := range have {
		ip, _ := netip.AddrFromSlice(a.IP)
		if a.Flags&unix.IFA_F_TENTATIVE == 0 {
			ready[ip] = true
			anyLinkLocal = anyLinkLocal || ip.IsLinkLocalUnicast()
		}
	}
	if linkLocal && !anyLinkLocal {
		return "link-local address", nil
	}
	for _, a := range addrs {
		if !ready[a] {
			return "address " + a.String(), nil
		}
		if a.IsLinkLocalUnicast() {
			continue // routed per link; its flags are the whole story
		}
		routes, err := nl.RouteGet(a.AsSlice())
		if err != nil {
			return "", fmt.Errorf("route to %s: %w", a, err)
		}
		if len(routes) == 0 || routes[0].Type != unix.RTN_LOCAL {
			return "local route of " + a.String(), nil
		}
	}
	return "", nil
}
