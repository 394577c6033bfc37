package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vishvananda/netlink"
)

// CheckEgressV4 verifies a pod's IPv4 egress as AddEgressV4 made it and
// returns every discrepancy found, each naming the missing or wrong piece:
// the veth pair, the pod's address and routes, the host's gateway address
// and route, and the pod's address in the SNAT set under a rule that
// SNATs to cfg.SNAT. A pod aws-node's egress-cni wired fails it: its host
// veth has a random name and its SNAT rule is in iptables, not here.
func (d *Dataplane) CheckEgressV4(ctx context.Context, cfg EgressV4Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	v, err := s.vethPair(PodConfig{NetNS: cfg.NetNS, IfName: cfg.IfName, HostVethName: cfg.HostVethName, MTU: cfg.MTU})
	if err != nil {
		return err
	}
	defer v.close()
	podNL, hostLink, podLink, problems := v.podNL, v.hostLink, v.podLink, v.problems
	if podLink != nil {
		p, err := checkEgressPodSide(podNL, cfg, podLink)
		if err != nil {
			return err
		}
		problems = append(problems, p...)
	}
	if hostLink != nil {
		p, err := checkEgressHostSide(s.nl, cfg, hostLink)
		if err != nil {
			return err
		}
		problems = append(problems, p...)
	}
	nft, err := s.nftables()
	if err != nil {
		return err
	}
	p, err := checkEgressSNAT(nft, cfg.SNAT, cfg.Addr.Addr())
	if err != nil {
		return err
	}
	problems = append(problems, p...)
	if len(problems) > 0 {
		return fmt.Errorf("pod egress %s (%s): %w", cfg.Addr, cfg.HostVethName, errors.Join(problems...))
	}
	return nil
}

func checkEgressPodSide(nl *nlHandle, cfg EgressV4Config, l netlink.Link) ([]error, error) {
	var problems []error
	addrs, err := nl.addrs(l)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return prefixOf(a.IPNet) == cfg.Addr }) {
		problems = append(problems, fmt.Errorf("%s in %s lacks address %s", cfg.IfName, cfg.NetNS, cfg.Addr))
	}
	routes, err := nl.routes(mainTable)
	if err != nil {
		return nil, err
	}
	for _, w := range egressPodRoutes(cfg, l.Attrs().Index) {
		if !slices.ContainsFunc(routes, func(r netlink.Route) bool {
			return r.LinkIndex == w.LinkIndex && prefixOrDefault(r.Dst) == prefixOrDefault(w.Dst) &&
				addrOf(r.Gw) == addrOf(w.Gw) && r.Scope == w.Scope
		}) {
			problems = append(problems, fmt.Errorf("pod lacks route %s", describeRoute(w, cfg.IfName)))
		}
	}
	return problems, nil
}

func describeRoute(r *netlink.Route, dev string) string {
	s := prefixOrDefault(r.Dst).String()
	if gw := addrOf(r.Gw); gw.IsValid() {
		s += " via " + gw.String()
	}
	s += " dev " + dev
	if r.Scope == netlink.SCOPE_LINK {
		s += " scope link"
	}
	return s
}

func checkEgressHostSide(nl *nlHandle, cfg EgressV4Config, l netlink.Link) ([]error, error) {
	var problems []error
	addrs, err := nl.addrs(l)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return prefixOf(a.IPNet) == host(cfg.Gateway) }) {
		problems = append(problems, fmt.Errorf("host veth %s lacks gateway address %s/32", cfg.HostVethName, cfg.Gateway))
	}
	routed, err := routedVia(nl, l.Attrs().Index)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(routed, cfg.Addr.Addr()) {
		problems = append(problems, fmt.Errorf("main table lacks route %s dev %s", cfg.Addr.Addr(), cfg.HostVethName))
	}
	return problems, nil
}
