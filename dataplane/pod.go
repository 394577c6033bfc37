package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// PodConfig describes one pod interface.
type PodConfig struct {
	// NetNS is the path of the pod's network namespace.
	NetNS string
	// IfName is the interface inside the pod (the CNI IfName, eth0).
	IfName string
	// HostVethName is the host end of the veth (see HostVethName).
	HostVethName string
	// Addr is the pod's IPv4 address, wired as a /32.
	Addr netip.Addr
	// RouteTable is the table of the pod's ENI; 0 for the primary ENI,
	// whose pods use the main table and need no rule 1536.
	RouteTable int
	// MTU of both veth ends; 0 means DefaultMTU.
	MTU int
}

// PodLinks names the two ends of a pod's veth, for the CNI result.
type PodLinks struct {
	Host Link
	Pod  Link
}

// Link is one network interface.
type Link struct {
	Name  string
	MAC   net.HardwareAddr
	Index int
}

func (c PodConfig) validate() error {
	if c.NetNS == "" {
		return errors.New("pod config: network namespace path is empty")
	}
	if err := validIfName(c.IfName); err != nil {
		return fmt.Errorf("pod config: pod interface: %w", err)
	}
	if err := validIfName(c.HostVethName); err != nil {
		return fmt.Errorf("pod config: host veth: %w", err)
	}
	if !c.Addr.Is4() || c.Addr.IsUnspecified() || c.Addr.IsLoopback() {
		return fmt.Errorf("pod config: address %q is not a usable IPv4 address", c.Addr)
	}
	if err := validRouteTable(c.RouteTable); err != nil {
		return fmt.Errorf("pod config: %w", err)
	}
	if err := validMTU(c.MTU); err != nil {
		return fmt.Errorf("pod config: %w", err)
	}
	return nil
}

// AddPod wires a pod: the veth pair with the pod end created directly in
// the pod's namespace, the pod's address, routes and gateway neighbour, the
// host route, rule 512, and rule 1536 when the pod is on a secondary ENI.
// A host veth of the same name left by an earlier sandbox of the same pod
// is replaced. On error, whatever AddPod created is removed again.
func (d *Dataplane) AddPod(ctx context.Context, cfg PodConfig) (_ PodLinks, err error) {
	if err := cfg.validate(); err != nil {
		return PodLinks{}, err
	}
	s, err := d.open(ctx)
	if err != nil {
		return PodLinks{}, err
	}
	defer s.close()
	podNS, err := openPodNS(cfg.NetNS)
	if err != nil {
		return PodLinks{}, err
	}
	defer podNS.Close()
	podNL, err := newNL(podNS)
	if err != nil {
		return PodLinks{}, err
	}
	defer podNL.close()

	if existing, err := podNL.linkByName(cfg.IfName); err != nil {
		return PodLinks{}, fmt.Errorf("look for %s in %s: %w", cfg.IfName, cfg.NetNS, err)
	} else if existing != nil {
		return PodLinks{}, fmt.Errorf("pod network namespace %s already has an interface %s", cfg.NetNS, cfg.IfName)
	}
	if err := replaceStaleVeth(s.nl, cfg.HostVethName); err != nil {
		return PodLinks{}, err
	}

	mtu := orDefaultMTU(cfg.MTU)
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: cfg.HostVethName, MTU: mtu},
		PeerName:      cfg.IfName,
		PeerMTU:       uint32(mtu),
		PeerNamespace: netlink.NsFd(int(podNS.Fd())),
	}
	if err := s.nl.linkAdd(veth); err != nil {
		return PodLinks{}, fmt.Errorf("create veth %s with peer %s in %s: %w", cfg.HostVethName, cfg.IfName, cfg.NetNS, err)
	}
	defer func() {
		if err != nil {
			if derr := undoAddPod(s.nl, cfg); derr != nil {
				d.log.Warn("undo partial pod wiring", "veth", cfg.HostVethName, "addr", cfg.Addr, "err", derr)
			}
		}
	}()
	hostLink, err := s.nl.linkByName(cfg.HostVethName)
	if err != nil || hostLink == nil {
		return PodLinks{}, fmt.Errorf("find new host veth %s: %w", cfg.HostVethName, errors.Join(err, errNoLink))
	}
	if err := s.nl.linkSetUp(hostLink); err != nil {
		return PodLinks{}, fmt.Errorf("set host veth %s up: %w", cfg.HostVethName, err)
	}
	podLink, err := wirePodSide(podNL, cfg, hostLink.Attrs().HardwareAddr)
	if err != nil {
		return PodLinks{}, err
	}
	if err := ctx.Err(); err != nil {
		return PodLinks{}, err
	}
	if err := wireHostSide(s.nl, cfg, hostLink); err != nil {
		return PodLinks{}, err
	}
	d.log.Info("pod wired", "veth", cfg.HostVethName, "addr", cfg.Addr, "table", cfg.RouteTable, "netns", cfg.NetNS)
	return PodLinks{Host: linkOf(hostLink), Pod: linkOf(podLink)}, nil
}

var errNoLink = errors.New("link does not exist")

// replaceStaleVeth deletes a leftover host veth of our name: kubelet
// recreated the pod's sandbox and the old one was never deleted.
func replaceStaleVeth(nl *nlHandle, name string) error {
	old, err := nl.linkByName(name)
	if err != nil {
		return fmt.Errorf("look for host veth %s: %w", name, err)
	}
	if old == nil {
		return nil
	}
	if _, ok := old.(*netlink.Veth); !ok {
		return fmt.Errorf("host veth name %s is taken by a %s link that is not ours", name, old.Type())
	}
	if err := nl.linkDel(old); err != nil && !isNotExist(err) {
		return fmt.Errorf("delete stale host veth %s: %w", name, err)
	}
	return nil
}

func wirePodSide(nl *nlHandle, cfg PodConfig, hostMAC net.HardwareAddr) (netlink.Link, error) {
	l, err := nl.linkByName(cfg.IfName)
	if err != nil || l == nil {
		return nil, fmt.Errorf("find %s in %s: %w", cfg.IfName, cfg.NetNS, errors.Join(err, errNoLink))
	}
	if err := nl.linkSetUp(l); err != nil {
		return nil, fmt.Errorf("set %s up in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	if err := nl.addrAdd(l, &netlink.Addr{IPNet: ipNet(host(cfg.Addr))}); err != nil {
		return nil, fmt.Errorf("add %s to %s in %s: %w", cfg.Addr, cfg.IfName, cfg.NetNS, err)
	}
	gw := PodGateway()
	idx := l.Attrs().Index
	for _, r := range []*netlink.Route{
		{LinkIndex: idx, Dst: ipNet(host(gw)), Scope: netlink.SCOPE_LINK},
		{LinkIndex: idx, Dst: ipNet(netip.PrefixFrom(netip.IPv4Unspecified(), 0)), Gw: gw.AsSlice()},
	} {
		if err := nl.routeReplace(r); err != nil {
			return nil, fmt.Errorf("add route %s in %s: %w", r, cfg.NetNS, err)
		}
	}
	if err := nl.neighSet(&netlink.Neigh{
		LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: gw.AsSlice(), HardwareAddr: hostMAC,
	}); err != nil {
		return nil, fmt.Errorf("add neighbour %s lladdr %s in %s: %w", gw, hostMAC, cfg.NetNS, err)
	}
	return l, nil
}

func wireHostSide(nl *nlHandle, cfg PodConfig, hostLink netlink.Link) error {
	if err := nl.routeReplace(&netlink.Route{
		LinkIndex: hostLink.Attrs().Index, Dst: ipNet(host(cfg.Addr)),
		Scope: netlink.SCOPE_LINK, Table: mainTable,
	}); err != nil {
		return fmt.Errorf("add route %s dev %s: %w", cfg.Addr, cfg.HostVethName, err)
	}
	have, err := nl.rules()
	if err != nil {
		return err
	}
	want := podRules(cfg.Addr, cfg.RouteTable)
	// A rule 1536 to another table is left from when the address was on a
	// different ENI; it would send the pod's traffic out of the wrong one.
	if err := deleteRules(nl, have, func(r ipRule) bool {
		return r.priority == FromPodPriority && r.src == host(cfg.Addr) && !containsRule(want, r)
	}); err != nil {
		return err
	}
	for _, r := range want {
		if err := ensureRule(nl, have, r); err != nil {
			return err
		}
	}
	return nil
}

// podRules are the policy rules of a pod at addr on the ENI with table.
func podRules(addr netip.Addr, table int) []ipRule {
	rules := []ipRule{{priority: ToPodPriority, dst: host(addr), table: mainTable}}
	if table != 0 {
		rules = append(rules, ipRule{priority: FromPodPriority, src: host(addr), table: table})
	}
	return rules
}

func containsRule(rules []ipRule, r ipRule) bool {
	for _, x := range rules {
		if x == r {
			return true
		}
	}
	return false
}

// undoAddPod removes the veth (which takes both ends and the host route
// with it) and the pod's rules.
func undoAddPod(nl *nlHandle, cfg PodConfig) error {
	var errs []error
	if l, err := nl.linkByName(cfg.HostVethName); err != nil {
		errs = append(errs, err)
	} else if l != nil {
		if err := nl.linkDel(l); err != nil && !isNotExist(err) {
			errs = append(errs, fmt.Errorf("delete host veth %s: %w", cfg.HostVethName, err))
		}
	}
	errs = append(errs, deletePodRules(nl, cfg.Addr))
	return errors.Join(errs...)
}

func linkOf(l netlink.Link) Link {
	a := l.Attrs()
	return Link{Name: a.Name, MAC: a.HardwareAddr, Index: a.Index}
}
