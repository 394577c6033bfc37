package fabric

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

var (
	// internetNet is the link between the router and the internet
	// namespace: documentation space (RFC 5737), never routed for real.
	internetNet = netip.MustParsePrefix("198.51.100.0/24")
	routerSide  = netip.MustParseAddr("198.51.100.1")
	// InternetAddr is the address of the host standing for the internet.
	InternetAddr = netip.MustParseAddr("198.51.100.10")
)

// InternetNS is the path of the namespace standing for the internet.
func (f *Fabric) InternetNS() string { return f.internet.path }

// wireInternet links the router to the internet namespace. For IPv4 the
// router has no default route: like an internet gateway it forwards only
// between the VPC and the outside, and replies reach a pod only if they
// come back to an address EC2 assigned, which SNAT to the node's primary
// address gives. For IPv6 see wireInternet6.
func (f *Fabric) wireInternet() error {
	for _, c := range f.cloud.VPCCIDRs() {
		if c.Overlaps(internetNet) {
			return fmt.Errorf("fabric: VPC CIDR %s overlaps the internet stand-in %s; pick another VPC range", c, internetNet)
		}
	}
	h, err := nsHandle(f.internet.path)
	if err != nil {
		return err
	}
	defer h.Close()
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: "inet0", MTU: f.mtu},
		PeerName:  "eth0", PeerNamespace: netlink.NsFd(int(h)),
	}
	if err := f.router.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("internet link: %w", err)
	}
	if err := upWithAddr(f.router.nl, "inet0", netip.PrefixFrom(routerSide, internetNet.Bits())); err != nil {
		return fmt.Errorf("router side of the internet link: %w", err)
	}
	if err := upWithAddr(f.internet.nl, "eth0", netip.PrefixFrom(InternetAddr, internetNet.Bits())); err != nil {
		return fmt.Errorf("internet side of its link: %w", err)
	}
	def := &netlink.Route{Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: routerSide.AsSlice()}
	if err := f.internet.nl.RouteReplace(def); err != nil {
		return fmt.Errorf("internet default route: %w", err)
	}
	return f.wireInternet6()
}

// upWithAddr gives the named link an address and brings it up.
func upWithAddr(nl *netlink.Handle, name string, p netip.Prefix) error {
	l, err := nl.LinkByName(name)
	if err != nil {
		return err
	}
	if err := nl.AddrReplace(l, &netlink.Addr{IPNet: ipNet(p)}); err != nil {
		return fmt.Errorf("address %s on %s: %w", p, name, err)
	}
	return nl.LinkSetUp(l)
}
