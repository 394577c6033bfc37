package fabric

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vpcnet/vpcnet/netfacts"
	"github.com/vpcnet/vpcnet/sim"
)

// mirror applies EC2's changes, in order, until the subscription ends.
func (f *Fabric) mirror(events <-chan sim.Event) {
	defer close(f.done)
	for ev := range events {
		err := f.apply(ev)
		f.mu.Lock()
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("mirror %s of %s: %w", ev.Kind, ev.NetworkInterfaceID, err))
			f.log.Error("fabric could not mirror an EC2 change", "event", ev.Kind, "eni", ev.NetworkInterfaceID, "err", err)
		}
		f.applied++
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
	}
}

// waitApplied blocks until n events have been mirrored.
func (f *Fabric) waitApplied(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		done, ch := f.applied >= n, f.changed
		f.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fabric) apply(ev sim.Event) error {
	if ev.InstanceID == "" {
		return nil // an ENI attached to nothing is on no wire
	}
	switch ev.Kind {
	case sim.ENIAttached:
		return f.attach(ev)
	case sim.ENIDetached:
		return f.detach(ev)
	}
	f.mu.Lock()
	w := f.enis[ev.NetworkInterfaceID]
	f.mu.Unlock()
	if w == nil {
		return fmt.Errorf("ENI is not wired")
	}
	switch ev.Kind {
	case sim.AddressesAssigned:
		return w.routeAddrs(f.router.nl, hostPrefixes(ev.Addresses), true)
	case sim.AddressesUnassigned:
		return w.routeAddrs(f.router.nl, hostPrefixes(ev.Addresses), false)
	case sim.PrefixesAssigned:
		return w.routeAddrs(f.router.nl, ev.Prefixes, true)
	case sim.PrefixesUnassigned:
		return w.routeAddrs(f.router.nl, ev.Prefixes, false)
	}
	return nil
}

// attach makes the ENI a veth pair: the node end carries the ENI's MAC and
// appears in the node as eth<device index> (c<card>eth<device index> on
// network cards other than 0), down and unconfigured as a
// hot-plugged NIC does, except eth0, which the instance's OS configures at
// boot.
func (f *Fabric) attach(ev sim.Event) error {
	n, ok := f.nodes[ev.InstanceID]
	if !ok {
		return fmt.Errorf("instance %s has no namespace (it was not running when the fabric started)", ev.InstanceID)
	}
	mac, err := net.ParseMAC(ev.MAC)
	if err != nil {
		return fmt.Errorf("MAC %q: %w", ev.MAC, err)
	}
	gw := netfacts.SubnetGateway(ev.SubnetCIDR)
	w := &wiredENI{node: n, routerLink: fmt.Sprintf("n%de%d", n.index, ev.DeviceIndex), mac: mac}
	nodeLink := fmt.Sprintf("eth%d", ev.DeviceIndex)
	if ev.NetworkCardIndex != 0 {
		// Device indexes count per network card: card 1 has its own
		// device 0 (an EFA, usually), which must not take eth0's name.
		w.routerLink = fmt.Sprintf("n%dc%de%d", n.index, ev.NetworkCardIndex, ev.DeviceIndex)
		nodeLink = fmt.Sprintf("c%deth%d", ev.NetworkCardIndex, ev.DeviceIndex)
	}
	if old, err := f.router.nl.LinkByName(w.routerLink); err == nil {
		_ = f.router.nl.LinkDel(old) // a stale wire from an earlier attachment
	}
	h, err := nsHandle(n.path)
	if err != nil {
		return err
	}
	defer h.Close()
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: w.routerLink, MTU: f.mtu},
		PeerName:  nodeLink, PeerHardwareAddr: mac, PeerNamespace: netlink.NsFd(int(h)),
	}
	if err := f.router.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s to %s/%s: %w", w.routerLink, n.id, nodeLink, err)
	}
	if peer, err := n.nl.LinkByName(nodeLink); err == nil {
		err = n.nl.LinkSetMTU(peer, f.mtu)
		if err != nil {
			return fmt.Errorf("MTU of %s/%s: %w", n.id, nodeLink, err)
		}
	}
	// The router answers ARP for the subnet gateway on every ENI link and,
	// by proxy ARP, for every address it routes elsewhere, like the VPC.
	if err := upWithAddr(f.router.nl, w.routerLink, netip.PrefixFrom(gw, 32)); err != nil {
		return err
	}
	// proxy_delay 0: the kernel otherwise waits up to 0.8 s before a
	// proxied ARP answer, which the VPC does not.
	for key, val := range map[string]string{
		"conf." + w.routerLink + ".proxy_arp":    "1",
		"conf." + w.routerLink + ".rp_filter":    "1",
		"neigh." + w.routerLink + ".proxy_delay": "0",
	} {
		if err := setSysctl(f.router.path, "net.ipv4."+key, val); err != nil {
			return err
		}
	}
	if ev.NetworkCardIndex == 0 && ev.DeviceIndex == 0 && len(ev.Addresses) > 0 {
		if err := f.bootPrimary(n, nodeLink, netip.PrefixFrom(ev.Addresses[0], ev.SubnetCIDR.Bits()), gw); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.enis[ev.NetworkInterfaceID] = w
	f.mu.Unlock()
	if err := w.routeAddrs(f.router.nl, hostPrefixes(ev.Addresses), true); err != nil {
		return err
	}
	if err := w.routeAddrs(f.router.nl, ev.Prefixes, true); err != nil {
		return err
	}
	f.log.Info("ENI wired", "instance", n.id, "eni", ev.NetworkInterfaceID, "link", nodeLink, "addresses", len(ev.Addresses), "prefixes", len(ev.Prefixes))
	return nil
}

// bootPrimary does what DHCP does on an instance's first interface.
func (f *Fabric) bootPrimary(n *node, link string, addr netip.Prefix, gw netip.Addr) error {
	if err := upWithAddr(n.nl, link, addr); err != nil {
		return fmt.Errorf("configure %s/%s: %w", n.id, link, err)
	}
	l, err := n.nl.LinkByName(link)
	if err != nil {
		return err
	}
	def := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: gw.AsSlice()}
	if err := n.nl.RouteReplace(def); err != nil {
		return fmt.Errorf("default route of %s: %w", n.id, err)
	}
	return nil
}

// detach removes the wire; the node end, and with it the node's
// interface, disappears as a detached NIC does.
func (f *Fabric) detach(ev sim.Event) error {
	f.mu.Lock()
	w := f.enis[ev.NetworkInterfaceID]
	delete(f.enis, ev.NetworkInterfaceID)
	f.mu.Unlock()
	if w == nil {
		return nil
	}
	l, err := f.router.nl.LinkByName(w.routerLink)
	if err != nil {
		return nil // already gone
	}
	if err := f.router.nl.LinkDel(l); err != nil {
		return fmt.Errorf("delete wire %s: %w", w.routerLink, err)
	}
	f.log.Info("ENI unwired", "instance", w.node.id, "eni", ev.NetworkInterfaceID)
	return nil
}

// routeAddrs adds (or removes) a route to each prefix over the ENI's wire
// and a permanent neighbour entry for every address in it: the router
// never asks the node who has an address, as the VPC never does.
func (w *wiredENI) routeAddrs(nl *netlink.Handle, ps []netip.Prefix, add bool) error {
	l, err := nl.LinkByName(w.routerLink)
	if err != nil {
		return fmt.Errorf("wire %s: %w", w.routerLink, err)
	}
	idx := l.Attrs().Index
	var errs []error
	for _, p := range ps {
		r := &netlink.Route{LinkIndex: idx, Dst: ipNet(p), Scope: netlink.SCOPE_LINK}
		if add {
			if err := nl.RouteReplace(r); err != nil {
				errs = append(errs, fmt.Errorf("route %s via %s: %w", p, w.routerLink, err))
			}
		} else if err := nl.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", p, err))
		}
		for a := p.Addr(); p.Contains(a); a = a.Next() {
			nb := &netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, IP: a.AsSlice(), HardwareAddr: w.mac}
			if add {
				if err := nl.NeighSet(nb); err != nil {
					errs = append(errs, fmt.Errorf("neighbour %s: %w", a, err))
				}
			} else if err := nl.NeighDel(nb); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("delete neighbour %s: %w", a, err))
			}
		}
	}
	return errors.Join(errs...)
}

func hostPrefixes(addrs []netip.Addr) []netip.Prefix {
	out := make([]netip.Prefix, len(addrs))
	for i, a := range addrs {
		out[i] = netip.PrefixFrom(a, 32)
	}
	return out
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func nsHandle(path string) (netns.NsHandle, error) {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return h, fmt.Errorf("open %s: %w", path, err)
	}
	return h, nil
}
