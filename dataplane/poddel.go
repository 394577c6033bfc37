package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// DelPod removes a pod's wiring and succeeds when it is already gone,
// including when the pod's namespace no longer exists: the runtime may
// delete the namespace before calling DEL, and DEL may be repeated (see
// https://github.com/kubernetes/kubernetes/issues/43014).
//
// Addr may be unknown (invalid): the addresses on the pod interface are
// used instead. HostVethName may be empty when the pod's name is unknown. A host veth is deleted by name only when it routes to one
// of the pod's addresses, so a late DEL of an old sandbox never cuts the
// veth of the pod's newer sandbox, which has the same name. The rules of an
// address are kept while another link still routes to it: a new pod
// already holds the address.
func (d *Dataplane) DelPod(ctx context.Context, cfg PodConfig) error {
	if cfg.HostVethName != "" {
		if err := validIfName(cfg.HostVethName); err != nil {
			return fmt.Errorf("pod config: host veth: %w", err)
		}
	}
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()

	var addrs []netip.Addr
	if cfg.Addr.IsValid() {
		addrs = append(addrs, cfg.Addr)
	}
	if cfg.NetNS != "" && cfg.IfName != "" {
		found, err := delPodSide(cfg)
		if err != nil {
			return err
		}
		for _, a := range found {
			if !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	if err := delHostVeth(s.nl, cfg.HostVethName, addrs); err != nil {
		return err
	}
	var errs []error
	for _, a := range addrs {
		errs = append(errs, deletePodRules(s.nl, a))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d.log.Info("pod unwired", "veth", cfg.HostVethName, "addrs", addrs, "netns", cfg.NetNS)
	return nil
}

// delPodSide deletes the pod interface, which removes the whole veth pair,
// and returns the addresses it had (IPv4 /32s, IPv6 /128s; not the
// kernel's own link-local /64).
func delPodSide(cfg PodConfig) ([]netip.Addr, error) {
	return delPodIface(cfg.NetNS, cfg.IfName, netip.Prefix.IsSingleIP)
}

// delPodIface deletes interface ifName in the pod's namespace (a veth
// end: the pair goes with it) and returns those of its addresses keep
// accepts. A namespace or interface already gone is no error: a DEL may
// come again, or after the runtime removed the namespace.
func delPodIface(netNS, ifName string, keep func(netip.Prefix) bool) ([]netip.Addr, error) {
	podNS, err := openPodNS(netNS)
	if errors.Is(err, ErrNetNSNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer podNS.Close()
	nl, err := newNL(podNS)
	if err != nil {
		return nil, err
	}
	defer nl.close()
	l, err := nl.linkByName(ifName)
	if err != nil || l == nil {
		return nil, err
	}
	list, err := nl.allAddrs(l)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	for _, a := range list {
		if p := prefixOf(a.IPNet); p.IsValid() && keep(p) {
			addrs = append(addrs, p.Addr())
		}
	}
	if err := nl.linkDel(l); err != nil && !isNotExist(err) {
		return nil, fmt.Errorf("delete %s in %s: %w", ifName, netNS, err)
	}
	return addrs, nil
}

// delHostVeth deletes the host veth if it routes to one of addrs.
func delHostVeth(nl *nlHandle, name string, addrs []netip.Addr) error {
	l, err := vethRoutingTo(nl, name, addrs)
	if err != nil || l == nil {
		return err
	}
	if err := nl.linkDel(l); err != nil && !isNotExist(err) {
		return fmt.Errorf("delete host veth %s: %w", name, err)
	}
	return nil
}

// vethRoutingTo is the host veth name if the main table routes one of
// addrs over it, else nil: a veth of that name that routes none of them
// is not this pod's (gone, or the address is another pod's now).
func vethRoutingTo(nl *nlHandle, name string, addrs []netip.Addr) (netlink.Link, error) {
	if name == "" || len(addrs) == 0 {
		return nil, nil
	}
	l, err := nl.linkByName(name)
	if err != nil || l == nil {
		return nil, err
	}
	routed, err := routedVia(nl, l.Attrs().Index)
	if err != nil || !slices.ContainsFunc(addrs, func(a netip.Addr) bool { return slices.Contains(routed, a) }) {
		return nil, err
	}
	return l, nil
}

// routedVia lists the /32 and /128 destinations the main table sends to
// link index.
func routedVia(nl *nlHandle, index int) ([]netip.Addr, error) {
	routes, err := nl.allRoutes(mainTable)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, r := range routes {
		if p := prefixOf(r.Dst); r.LinkIndex == index && p.IsValid() && p.IsSingleIP() {
			out = append(out, p.Addr())
		}
	}
	return out, nil
}

// deletePodRules deletes rules 512 and 1536 of addr unless a main-table
// /32 route to addr still exists, which means another pod owns it now.
func deletePodRules(nl *nlHandle, addr netip.Addr) error {
	if !addr.IsValid() {
		return nil
	}
	routes, err := nl.routesOf(addr, mainTable)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(routes, func(r netlink.Route) bool { return prefixOf(r.Dst) == host(addr) }) {
		return nil
	}
	rules, err := nl.rulesOf(addr)
	if err != nil {
		return err
	}
	return deleteRules(nl, rules, func(r ipRule) bool {
		return (r.priority == ToPodPriority && r.dst == host(addr) && !r.src.IsValid()) ||
			(r.priority == FromPodPriority && r.src == host(addr) && !r.dst.IsValid())
	})
}

// UnroutePod removes what points the node at a pod's address, the host
// route over its veth and rules 512 and 1536, and leaves the veth pair
// for DeleteVeth: deleting a veth waits on the kernel (about 20 ms, an
// RCU grace period), which a DEL need not wait for once nothing routes to
// it. It returns the host veth's index, or 0 when the veth does not route
// to addr (gone, or the address is another pod's now): then nothing was
// changed, and DelPod is what the caller needs.
func (d *Dataplane) UnroutePod(ctx context.Context, cfg PodConfig) (int, error) {
	if cfg.HostVethName == "" || !cfg.Addr.IsValid() {
		return 0, nil // DelPod finds what it can without them
	}
	if err := validIfName(cfg.HostVethName); err != nil {
		return 0, fmt.Errorf("pod config: host veth: %w", err)
	}
	s, err := d.open(ctx)
	if err != nil {
		return 0, err
	}
	defer s.close()
	l, err := vethRoutingTo(s.nl, cfg.HostVethName, []netip.Addr{cfg.Addr})
	if err != nil || l == nil {
		return 0, err
	}
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(host(cfg.Addr)), Table: mainTable, Scope: netlink.SCOPE_LINK}
	if err := s.nl.routeDel(r); err != nil && !isNotExist(err) {
		return 0, fmt.Errorf("delete route to %s via %s: %w", cfg.Addr, cfg.HostVethName, err)
	}
	if err := deletePodRules(s.nl, cfg.Addr); err != nil {
		return 0, err
	}
	d.log.Info("pod unrouted", "veth", cfg.HostVethName, "addr", cfg.Addr)
	return l.Attrs().Index, nil
}

// DeleteVeth deletes the host veth at index, and with it the pod's end,
// if it is still the veth of that name: by the time it runs, a new
// sandbox of the same pod may have made a veth of the same name.
func (d *Dataplane) DeleteVeth(ctx context.Context, name string, index int) error {
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	l, err := s.nl.linkByIndex(index)
	if err != nil {
		return fmt.Errorf("find veth %s (index %d): %w", name, index, err)
	}
	if _, ok := l.(*netlink.Veth); !ok || l.Attrs().Name != name {
		return nil // gone, or the index is another link's now
	}
	if err := s.nl.linkDel(l); err != nil && !isNotExist(err) {
		return fmt.Errorf("delete veth %s: %w", name, err)
	}
	return nil
}
