package fabric

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vpcnet/vpcnet/netfacts"
	"github.com/vpcnet/vpcnet/sim"
)

// slot is where an ENI is plugged into an instance. A hypervisor
// hot-plugs each device on its own, so the fabric mirrors each slot's
// changes in EC2's order but never makes one slot wait for another: with
// one queue for everything, a node's fourth ENI of a burst appeared only
// once the first three were routed, up to 0.8 s after EC2 said attached.
// Every event of an attached ENI names its slot, so an ENI's own changes
// stay in order; the one change that crosses slots, an ENI detached from
// one slot and attached at another, is made safe in detach.
type slot struct {
	instance     string
	card, device int
}

// lane mirrors one slot's events, one at a time, on a router handle of
// its own: netlink serialises requests on a shared handle, which would
// put the lanes back in one queue.
type lane struct {
	nl *netlink.Handle
	// eni is the ENI whose wire the slot holds, if any, and plugged says
	// whether its attach has completed. Only the lane's goroutine uses
	// them.
	eni     string
	plugged bool
	// guarded by Fabric.mu
	pending []sim.Event
	running bool
}

// mirror applies EC2's changes until the subscription ends, each slot's in
// order.
func (f *Fabric) mirror(events <-chan sim.Event) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		for _, l := range f.lanes {
			if l.nl != nil {
				l.nl.Close()
			}
		}
		close(f.done)
	}()
	for ev := range events {
		if ev.InstanceID == "" {
			f.finish(ev, nil) // an ENI attached to nothing is on no wire
			continue
		}
		s := slot{instance: ev.InstanceID, card: ev.NetworkCardIndex, device: ev.DeviceIndex}
		f.mu.Lock()
		l := f.lanes[s]
		if l == nil {
			l = &lane{}
			f.lanes[s] = l
		}
		l.pending = append(l.pending, ev)
		start := !l.running
		l.running = true
		f.mu.Unlock()
		if start {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.drain(l)
			}()
		}
	}
}

// drain applies l's events until none is pending.
func (f *Fabric) drain(l *lane) {
	for {
		f.mu.Lock()
		if len(l.pending) == 0 {
			l.running = false
			f.mu.Unlock()
			return
		}
		ev := l.pending[0]
		l.pending = l.pending[1:]
		f.mu.Unlock()
		f.finish(ev, f.apply(l, ev))
	}
}

// finish records that ev was mirrored, or why not.
func (f *Fabric) finish(ev sim.Event, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.errs = append(f.errs, fmt.Errorf("mirror %s of %s: %w", ev.Kind, ev.NetworkInterfaceID, err))
		f.log.Error("fabric could not mirror an EC2 change", "event", ev.Kind, "eni", ev.NetworkInterfaceID, "err", err)
	}
	if ev.Initial {
		f.initialApplied++
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitApplied blocks until n of the ENIs attached when the subscription
// began have been wired.
func (f *Fabric) waitApplied(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		done, ch := f.initialApplied >= n, f.changed
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

func (f *Fabric) apply(l *lane, ev sim.Event) error {
	if f.hooks.beforeApply != nil {
		f.hooks.beforeApply(ev)
	}
	if l.nl == nil {
		h, err := nsHandle(f.router.path)
		if err != nil {
			return err
		}
		l.nl, err = netlink.NewHandleAt(h)
		h.Close()
		if err != nil {
			return fmt.Errorf("netlink in the router: %w", err)
		}
	}
	switch ev.Kind {
	case sim.ENIAttaching:
		return f.lay(l, ev)
	case sim.ENIAttached:
		return f.attach(l, ev)
	case sim.ENIDetached:
		return f.detach(l, ev)
	}
	f.mu.Lock()
	w := f.enis[ev.NetworkInterfaceID]
	f.mu.Unlock()
	if w == nil {
		return fmt.Errorf("ENI is not wired")
	}
	switch ev.Kind {
	case sim.AddressesAssigned:
		return w.routeAddrs(l.nl, hostPrefixes(ev.Addresses), true)
	case sim.AddressesUnassigned:
		return w.routeAddrs(l.nl, hostPrefixes(ev.Addresses), false)
	case sim.PrefixesAssigned:
		return w.routeAddrs(l.nl, ev.Prefixes, true)
	case sim.PrefixesUnassigned:
		return w.routeAddrs(l.nl, ev.Prefixes, false)
	case sim.IPv6AddressesAssigned, sim.IPv6AddressesUnassigned, sim.IPv6PrefixesAssigned, sim.IPv6PrefixesUnassigned:
		return f.mirror6(l, w, ev)
	}
	// A kind added to the emulator must be mirrored on purpose: ignored,
	// the namespaces would silently stop matching EC2.
	return fmt.Errorf("the fabric does not mirror events of kind %q", ev.Kind)
}

// routerLinkName is the router's end of the wire to an instance's slot.
// Device indexes count per network card: card 1 has its own device 0 (an
// EFA, usually).
func routerLinkName(n *node, ev sim.Event) string {
	if ev.NetworkCardIndex != 0 {
		return fmt.Sprintf("n%dc%de%d", n.index, ev.NetworkCardIndex, ev.DeviceIndex)
	}
	return fmt.Sprintf("n%de%d", n.index, ev.DeviceIndex)
}

// nodeLinkName is the interface the instance sees, named as EC2's Linux
// images name it; card 1's device 0 must not take eth0's name.
func nodeLinkName(ev sim.Event) string {
	if ev.NetworkCardIndex != 0 {
		return fmt.Sprintf("c%deth%d", ev.NetworkCardIndex, ev.DeviceIndex)
	}
	return fmt.Sprintf("eth%d", ev.DeviceIndex)
}

// standInMAC marks a node interface that is not plugged in yet: it never
// equals an ENI's MAC, which EC2 (and the emulator) start with 02.
func standInMAC(mac net.HardwareAddr) net.HardwareAddr {
	out := slices.Clone(mac)
	out[0] = 0x06
	return out
}

// lay makes the ENI's wire as its attach begins: a veth pair whose node
// end appears in the node as eth<device index> (c<card>eth<device index>
// on network cards other than 0), down and carrying a stand-in MAC, and
// the router's routes and neighbour entries for every address of the ENI,
// IPv6 ones and the fe80::1 gateway included in a dual-stack subnet.
// The VPC learns an attachment's routes while the instance waits for the
// device, so none of this work is left for the moment the attach
// completes, when a burst's pods wait for it.
func (f *Fabric) lay(l *lane, ev sim.Event) error {
	n, ok := f.nodes[ev.InstanceID]
	if !ok {
		return fmt.Errorf("instance %s has no namespace (it was not running when the fabric started)", ev.InstanceID)
	}
	mac, err := net.ParseMAC(ev.MAC)
	if err != nil {
		return fmt.Errorf("MAC %q: %w", ev.MAC, err)
	}
	gw := netfacts.SubnetGateway(ev.SubnetCIDR)
	w := &wiredENI{node: n, routerLink: routerLinkName(n, ev), mac: mac}
	nodeLink := nodeLinkName(ev)
	if old, err := l.nl.LinkByName(w.routerLink); err == nil {
		_ = l.nl.LinkDel(old) // a stale wire from an earlier attachment
	}
	l.eni, l.plugged = "", false
	h, err := nsHandle(n.path)
	if err != nil {
		return err
	}
	defer h.Close()
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: w.routerLink, MTU: f.mtu},
		PeerName:  nodeLink, PeerHardwareAddr: standInMAC(mac), PeerMTU: uint32(f.mtu), PeerNamespace: netlink.NsFd(int(h)),
	}
	if err := l.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s to %s/%s: %w", w.routerLink, n.id, nodeLink, err)
	}
	l.eni = ev.NetworkInterfaceID
	// The router answers ARP for the subnet gateway on every ENI link and,
	// by proxy ARP, for every address it routes elsewhere, like the VPC.
	if err := upWithAddr(l.nl, w.routerLink, netip.PrefixFrom(gw, 32)); err != nil {
		return err
	}
	// proxy_delay 0: the kernel otherwise waits up to 0.8 s before a
	// proxied ARP answer, which the VPC does not.
	if err := setSysctls(f.router.path, map[string]string{
		"net.ipv4.conf." + w.routerLink + ".proxy_arp":    "1",
		"net.ipv4.conf." + w.routerLink + ".rp_filter":    "1",
		"net.ipv4.neigh." + w.routerLink + ".proxy_delay": "0",
	}); err != nil {
		return err
	}
	// The node's end holds no address tentative either (see ipv6.go):
	// its link-local is the source of its solicitations for fe80::1.
	if err := setSysctl(n.path, "net.ipv6.conf."+nodeLink+".accept_dad", "0"); err != nil {
		return fmt.Errorf("node %s: %w", n.id, err)
	}
	f.mu.Lock()
	f.enis[ev.NetworkInterfaceID] = w
	f.mu.Unlock()
	if f.hooks.beforeRoutes != nil {
		f.hooks.beforeRoutes(ev)
	}
	if err := w.routeAddrs(l.nl, hostPrefixes(ev.Addresses), true); err != nil {
		return err
	}
	if err := w.routeAddrs(l.nl, ev.Prefixes, true); err != nil {
		return err
	}
	if !ev.SubnetIPv6CIDR.IsValid() {
		return nil
	}
	if err := f.vpcBlock6(l.nl, ev.SubnetIPv6CIDR); err != nil {
		return err
	}
	if err := w.gateway6(l.nl); err != nil {
		return err
	}
	return w.route6(l.nl, ev.IPv6Addresses, ev.IPv6Prefixes, true)
}

// attach plugs the ENI in as its attach completes: the node end gets the
// ENI's MAC, which is how the agent knows the interface, and eth0 is
// configured as the instance's OS does at boot. An ENI whose wire was not
// laid as its attach began (one attached before the fabric started) gets
// it now, so in the VPC as here an address works from the moment its ENI
// is attached: a pod given one never finds the router without its route.
func (f *Fabric) attach(l *lane, ev sim.Event) error {
	if l.eni != ev.NetworkInterfaceID || l.plugged {
		if err := f.lay(l, ev); err != nil {
			return err
		}
	}
	n := f.nodes[ev.InstanceID]
	f.mu.Lock()
	w := f.enis[ev.NetworkInterfaceID]
	f.mu.Unlock()
	nodeLink := nodeLinkName(ev)
	peer, err := n.nl.LinkByName(nodeLink)
	if err != nil {
		return fmt.Errorf("find %s/%s: %w", n.id, nodeLink, err)
	}
	if err := n.nl.LinkSetHardwareAddr(peer, w.mac); err != nil {
		return fmt.Errorf("plug in %s/%s: MAC %s: %w", n.id, nodeLink, w.mac, err)
	}
	l.plugged = true
	if primarySlot(ev) && len(ev.Addresses) > 0 {
		gw := netfacts.SubnetGateway(ev.SubnetCIDR)
		if err := f.bootPrimary(n, nodeLink, netip.PrefixFrom(ev.Addresses[0], ev.SubnetCIDR.Bits()), gw); err != nil {
			return err
		}
		if err := f.bootPrimary6(n, nodeLink, ev); err != nil {
			return err
		}
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

// detach removes the slot's wire if it is this ENI's; the node end, and
// with it the node's interface, disappears as a detached NIC does. The
// ENI's record is dropped only if it is this slot's: the ENI may already
// be attached at another slot, whose lane ran first.
func (f *Fabric) detach(l *lane, ev sim.Event) error {
	n, ok := f.nodes[ev.InstanceID]
	if !ok {
		return nil
	}
	link := routerLinkName(n, ev)
	f.mu.Lock()
	if w := f.enis[ev.NetworkInterfaceID]; w != nil && w.routerLink == link {
		delete(f.enis, ev.NetworkInterfaceID)
	}
	f.mu.Unlock()
	if l.eni != ev.NetworkInterfaceID {
		return nil // never wired here, or the slot already holds another ENI
	}
	l.eni, l.plugged = "", false
	wire, err := l.nl.LinkByName(link)
	if err != nil {
		return nil // already gone
	}
	if err := l.nl.LinkDel(wire); err != nil {
		return fmt.Errorf("delete wire %s: %w", link, err)
	}
	f.log.Info("ENI unwired", "instance", n.id, "eni", ev.NetworkInterfaceID)
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
