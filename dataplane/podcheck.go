package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// CheckPod verifies a pod's wiring on both sides and returns every
// discrepancy found, each naming the missing or wrong piece.
func (d *Dataplane) CheckPod(ctx context.Context, cfg PodConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	v, err := s.vethPair(cfg)
	if err != nil {
		return err
	}
	defer v.close()
	podNL, hostLink, podLink, problems := v.podNL, v.hostLink, v.podLink, v.problems
	if hostLink != nil && podLink != nil {
		p, err := checkPodSide(podNL, cfg, podLink, hostLink.Attrs().HardwareAddr)
		if err != nil {
			return err
		}
		problems = append(problems, p...)
	}
	if hostLink != nil {
		p, err := checkHostRoute(s.nl, cfg, hostLink)
		if err != nil {
			return err
		}
		problems = append(problems, p...)
	}
	p, err := checkRules(s.nl, cfg)
	if err != nil {
		return err
	}
	problems = append(problems, p...)
	if len(problems) > 0 {
		return fmt.Errorf("pod %s (%s): %w", cfg.Addr, cfg.HostVethName, errors.Join(problems...))
	}
	return nil
}

// vethEnds are both ends of a pod's veth pair as found, nil when
// missing, and what is wrong with the pair: a missing end, or the pair
// not as cfg says (checkPair).
type vethEnds struct {
	podNS             ns.NetNS
	podNL             *nlHandle
	hostLink, podLink netlink.Link
	problems          []error
}

// vethPair opens the pod's namespace and looks up both ends of its veth
// pair, the start of every check of a pod's wiring; close releases the
// namespace.
func (s *session) vethPair(cfg PodConfig) (*vethEnds, error) {
	podNS, err := openPodNS(cfg.NetNS)
	if err != nil {
		return nil, err
	}
	podNL, err := newNL(podNS)
	if err != nil {
		podNS.Close()
		return nil, err
	}
	v := &vethEnds{podNS: podNS, podNL: podNL}
	if v.hostLink, err = s.nl.linkByName(cfg.HostVethName); err == nil {
		v.podLink, err = podNL.linkByName(cfg.IfName)
	}
	if err != nil {
		v.close()
		return nil, err
	}
	if v.hostLink == nil {
		v.problems = append(v.problems, fmt.Errorf("host veth %s does not exist", cfg.HostVethName))
	}
	if v.podLink == nil {
		v.problems = append(v.problems, fmt.Errorf("%s does not exist in %s", cfg.IfName, cfg.NetNS))
	}
	if v.hostLink != nil && v.podLink != nil {
		v.problems = append(v.problems, checkPair(cfg, v.hostLink, v.podLink)...)
	}
	return v, nil
}

func (v *vethEnds) close() {
	v.podNL.close()
	v.podNS.Close()
}

func checkPair(cfg PodConfig, hostLink, podLink netlink.Link) []error {
	var problems []error
	if _, ok := hostLink.(*netlink.Veth); !ok {
		problems = append(problems, fmt.Errorf("host link %s is a %s, not a veth", cfg.HostVethName, hostLink.Type()))
	}
	if hostLink.Attrs().ParentIndex != podLink.Attrs().Index || podLink.Attrs().ParentIndex != hostLink.Attrs().Index {
		problems = append(problems, fmt.Errorf("host veth %s is not the peer of %s in %s", cfg.HostVethName, cfg.IfName, cfg.NetNS))
	}
	for _, l := range []netlink.Link{hostLink, podLink} {
		if l.Attrs().Flags&net.FlagUp == 0 {
			problems = append(problems, fmt.Errorf("%s is down", l.Attrs().Name))
		}
		if cfg.MTU != 0 && l.Attrs().MTU != cfg.MTU {
			problems = append(problems, fmt.Errorf("%s has MTU %d, want %d", l.Attrs().Name, l.Attrs().MTU, cfg.MTU))
		}
	}
	return problems
}

func checkPodSide(nl *nlHandle, cfg PodConfig, podLink netlink.Link, hostMAC net.HardwareAddr) ([]error, error) {
	var problems []error
	addrs, err := nl.addrsOf(cfg.Addr, podLink)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return prefixOf(a.IPNet) == host(cfg.Addr) }) {
		problems = append(problems, fmt.Errorf("%s in %s lacks address %s", cfg.IfName, cfg.NetNS, host(cfg.Addr)))
	}
	routes, err := nl.routesOf(cfg.Addr, mainTable)
	if err != nil {
		return nil, err
	}
	gw, linkScope := PodGateway(), netlink.SCOPE_LINK
	if cfg.IPv6 {
		// IPv6 routes have no scope: the kernel reports universe.
		gw, linkScope = PodGateway6(), netlink.SCOPE_UNIVERSE
	}
	idx := podLink.Attrs().Index
	if !slices.ContainsFunc(routes, func(r netlink.Route) bool {
		return r.LinkIndex == idx && prefixOf(r.Dst) == host(gw) && r.Scope == linkScope
	}) {
		problems = append(problems, fmt.Errorf("pod lacks route %s dev %s scope link", gw, cfg.IfName))
	}
	if !slices.ContainsFunc(routes, func(r netlink.Route) bool {
		return r.LinkIndex == idx && prefixOrDefault(r.Dst).Bits() == 0 && addrOf(r.Gw) == gw
	}) {
		problems = append(problems, fmt.Errorf("pod lacks default route via %s dev %s", gw, cfg.IfName))
	}
	neighs, err := nl.neighboursOf(cfg.Addr, podLink)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(neighs, func(n netlink.Neigh) bool {
		return addrOf(n.IP) == gw && n.State&netlink.NUD_PERMANENT != 0 && n.HardwareAddr.String() == hostMAC.String()
	}) {
		problems = append(problems, fmt.Errorf("pod lacks permanent neighbour %s lladdr %s", gw, hostMAC))
	}
	return problems, nil
}

func checkHostRoute(nl *nlHandle, cfg PodConfig, hostLink netlink.Link) ([]error, error) {
	routed, err := routedVia(nl, hostLink.Attrs().Index)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(routed, cfg.Addr) {
		return []error{fmt.Errorf("main table lacks route %s dev %s", cfg.Addr, cfg.HostVethName)}, nil
	}
	return nil, nil
}

func checkRules(nl *nlHandle, cfg PodConfig) ([]error, error) {
	have, err := nl.rulesOf(cfg.Addr)
	if err != nil {
		return nil, err
	}
	var ours []ipRule
	for _, nr := range have {
		if r, ok := ruleFromNetlink(nr); ok {
			ours = append(ours, r)
		}
	}
	var problems []error
	want := podRules(cfg.Addr, cfg.RouteTable)
	for _, w := range want {
		if !slices.Contains(ours, w) {
			problems = append(problems, fmt.Errorf("rule %q is missing", w))
		}
	}
	for _, r := range ours {
		if r.priority == FromPodPriority && r.src == host(cfg.Addr) && !slices.Contains(want, r) {
			problems = append(problems, fmt.Errorf("unexpected rule %q", r))
		}
	}
	return problems, nil
}

// PodRoute is a main-table /32 (or, for an IPv6 pod, /128) route to a
// pod's host veth.
type PodRoute struct {
	Addr     netip.Addr
	HostVeth string
}

// PodAddrs lists the pod addresses the main table routes to a host veth of
// ours. An address listed here is in use by a live pod whatever any
// bookkeeping says; the agent never releases it.
func (d *Dataplane) PodAddrs(ctx context.Context) ([]PodRoute, error) {
	s, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	links, err := s.nl.links()
	if err != nil {
		return nil, err
	}
	veths := map[int]string{}
	for _, l := range links {
		if _, ok := l.(*netlink.Veth); ok && strings.HasPrefix(l.Attrs().Name, d.vethPrefix) {
			veths[l.Attrs().Index] = l.Attrs().Name
		}
	}
	// Both families: an IPv6 pod's route is the same proof of life.
	routes, err := s.nl.allRoutes(mainTable)
	if err != nil {
		return nil, err
	}
	var out []PodRoute
	for _, r := range routes {
		name, ok := veths[r.LinkIndex]
		if p := prefixOf(r.Dst); ok && p.IsValid() && p.IsSingleIP() && (p.Addr().Is4() || p.Addr().IsGlobalUnicast()) {
			out = append(out, PodRoute{Addr: p.Addr(), HostVeth: name})
		}
	}
	slices.SortFunc(out, func(a, b PodRoute) int { return a.Addr.Compare(b.Addr) })
	return out, nil
}
