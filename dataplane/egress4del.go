package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

// DelEgressV4 removes a pod's IPv4 egress and succeeds when it is already
// gone, also when the pod's namespace no longer exists (the runtime may
// delete it before DEL, and DEL may repeat). It deletes the pod's egress
// interface (the veth pair, the host route and the gateway address go with
// it) and the host veth of cfg.HostVethName, removes the pod's addresses
// from the SNAT set, and forgets their connections, so that the next pod
// given the address starts with no NAT binding of this one. Only
// NetNS, IfName, HostVethName and Owner are used. It returns the
// addresses it found, from the pod's interface and the SNAT set.
func (d *Dataplane) DelEgressV4(ctx context.Context, cfg EgressV4Config) ([]netip.Addr, error) {
	if cfg.HostVethName != "" {
		if err := validIfName(cfg.HostVethName); err != nil {
			return nil, fmt.Errorf("egress config: host veth: %w", err)
		}
	}
	s, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	var addrs []netip.Addr
	if cfg.NetNS != "" && cfg.IfName != "" {
		if addrs, err = delEgressPodSide(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.HostVethName != "" {
		if l, err := s.nl.linkByName(cfg.HostVethName); err != nil {
			return nil, err
		} else if _, ok := l.(*netlink.Veth); ok {
			if err := s.nl.linkDel(l); err != nil && !isNotExist(err) {
				return nil, fmt.Errorf("delete host veth %s: %w", cfg.HostVethName, err)
			}
		}
	}
	nft, err := s.nftables()
	if err != nil {
		return nil, err
	}
	removed, err := delEgressSNAT(nft, addrs, cfg.Owner)
	if err != nil {
		return nil, err
	}
	for _, a := range removed {
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) > 0 {
		if err := forgetFlowsFrom(s.ns, addrs); err != nil {
			return nil, err
		}
	}
	d.log.Info("pod egress unwired", "veth", cfg.HostVethName, "addrs", addrs, "netns", cfg.NetNS)
	return addrs, nil
}

// delEgressPodSide deletes the pod's egress interface and returns its
// IPv4 addresses.
func delEgressPodSide(cfg EgressV4Config) ([]netip.Addr, error) {
	return delPodIface(cfg.NetNS, cfg.IfName, func(p netip.Prefix) bool { return p.Addr().Is4() })
}

// EgressV4Addr is the IPv4 address, with its subnet's length, on the
// pod's egress interface, or the invalid Prefix when the interface does
// not exist or has none.
func (d *Dataplane) EgressV4Addr(netNS, ifName string) (netip.Prefix, error) {
	podNS, err := openPodNS(netNS)
	if err != nil {
		return netip.Prefix{}, err
	}
	defer podNS.Close()
	nl, err := newNL(podNS)
	if err != nil {
		return netip.Prefix{}, err
	}
	defer nl.close()
	l, err := nl.linkByName(ifName)
	if err != nil || l == nil {
		return netip.Prefix{}, err
	}
	list, err := nl.addrs(l)
	if err != nil {
		return netip.Prefix{}, err
	}
	var found []netip.Prefix
	for _, a := range list {
		if p := prefixOf(a.IPNet); p.IsValid() && p.Addr().Is4() {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return netip.Prefix{}, nil
	case 1:
		return found[0], nil
	}
	return netip.Prefix{}, fmt.Errorf("%s in %s has %d IPv4 addresses %v, want one", ifName, netNS, len(found), found)
}

// GCEgressV4 removes the IPv4 egress of every attachment of network in
// the SNAT set that keep does not keep, as DEL would with the pod's
// namespace gone: it deletes the attachment's host veth (the pod end and
// the route go with it), calls release (the caller gives the address
// back to IPAM), and only then removes its element and forgets its
// connections. An attachment whose release fails keeps its element, so
// the next GC finds it again; an element is removed by its owner, never
// by address, so it cannot take the element of a pod given the address
// since. It returns the owners (EgressV4Owner) it removed.
func (d *Dataplane) GCEgressV4(ctx context.Context, network string, keep func(owner string) bool, release func(owner string) error) ([]string, error) {
	s, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	nft, err := s.nftables()
	if err != nil {
		return nil, err
	}
	t, err := nft.table(nftables.TableFamilyIPv4, EgressV4Table)
	if err != nil || t == nil {
		return nil, err
	}
	_, elems, err := egressElements(nft, t)
	if err != nil {
		return nil, err
	}
	var owners []string
	var addrs []netip.Addr
	var errs []error
	for _, e := range elems {
		if !strings.HasPrefix(e.Comment, network+"/") || keep(e.Comment) {
			continue
		}
		if l, err := s.nl.linkByName(egressVethOf(e.Comment)); err != nil {
			errs = append(errs, err)
			continue
		} else if _, ok := l.(*netlink.Veth); ok {
			if err := s.nl.linkDel(l); err != nil && !isNotExist(err) {
				errs = append(errs, fmt.Errorf("delete host veth %s of %s: %w", l.Attrs().Name, e.Comment, err))
				continue
			}
		}
		if err := release(e.Comment); err != nil {
			errs = append(errs, fmt.Errorf("release the address of %s: %w", e.Comment, err))
			continue
		}
		if _, err := delEgressSNAT(nft, nil, e.Comment); err != nil {
			errs = append(errs, err)
			continue
		}
		owners = append(owners, e.Comment)
		addrs = append(addrs, keyAddr(e))
	}
	if len(addrs) > 0 {
		errs = append(errs, forgetFlowsFrom(s.ns, addrs))
		d.log.Info("stale pod egress removed", "owners", owners, "addrs", addrs)
	}
	return owners, errors.Join(errs...)
}
