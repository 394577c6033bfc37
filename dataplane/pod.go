package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// PodConfig describes one pod interface.
type PodConfig struct {
	// NetNS is the path of the pod's network namespace.
	NetNS string
	// IfName is the interface inside the pod (the CNI IfName, eth0).
	IfName string
	// HostVethName is the host end of the veth (see HostVethName).
	HostVethName string
	// Addr is the pod's address: IPv4, wired as a /32, or with IPv6 an
	// IPv6 address, wired as a /128.
	Addr netip.Addr
	// IPv6 says the pod gets an IPv6 address (aws-node's IPv6 mode): its
	// interface routes through PodGateway6 instead of PodGateway. Known
	// when the veth is made (PrewirePod), before the address is.
	IPv6 bool
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

// validate checks everything AddPod and WirePod need.
func (c PodConfig) validate() error {
	if err := c.validateVeth(); err != nil {
		return err
	}
	switch {
	case c.IPv6 && (!c.Addr.Is6() || c.Addr.Is4In6() || c.Addr.Zone() != "" || !c.Addr.IsGlobalUnicast()):
		return fmt.Errorf("pod config: address %q is not a usable IPv6 address", c.Addr)
	case !c.IPv6 && (!c.Addr.Is4() || c.Addr.IsUnspecified() || c.Addr.IsLoopback()):
		return fmt.Errorf("pod config: address %q is not a usable IPv4 address", c.Addr)
	}
	if err := validRouteTable(c.RouteTable); err != nil {
		return fmt.Errorf("pod config: %w", err)
	}
	return nil
}

// validateVeth checks what PrewirePod needs, which is all but the address
// and its table.
func (c PodConfig) validateVeth() error {
	if c.NetNS == "" {
		return errors.New("pod config: network namespace path is empty")
	}
	if err := validIfName(c.IfName); err != nil {
		return fmt.Errorf("pod config: pod interface: %w", err)
	}
	if err := validIfName(c.HostVethName); err != nil {
		return fmt.Errorf("pod config: host veth: %w", err)
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
// is replaced. On error, whatever AddPod created is removed again. It is
// PrewirePod then WirePod, for callers that know the address up front.
func (d *Dataplane) AddPod(ctx context.Context, cfg PodConfig) (PodLinks, error) {
	if err := cfg.validate(); err != nil {
		return PodLinks{}, err
	}
	p, err := d.PrewirePod(ctx, cfg)
	if err != nil {
		return PodLinks{}, err
	}
	return d.WirePod(ctx, p, cfg)
}

// WirePod finishes, once the pod's address is known, the wiring PrewirePod
// began: the address on the pod interface, the MTU of both ends when
// cfg's differs from the one the veth was made with, the host route, rule
// 512, and rule 1536 when the pod is on a secondary ENI. cfg must name the
// namespace, interface and host veth p was made for. p is spent whatever
// the outcome; on error the veth and whatever WirePod added are removed.
func (d *Dataplane) WirePod(ctx context.Context, p *PrewiredPod, cfg PodConfig) (_ PodLinks, err error) {
	if p.spent {
		return PodLinks{}, fmt.Errorf("wire pod %s: its veth was already wired or removed", p.cfg.HostVethName)
	}
	p.spent = true
	defer p.release()
	// The address's rules are undone only once cfg is known to be this
	// veth's: a bad cfg must not cost another pod its rules.
	var undoAddr netip.Addr
	defer func() {
		if err != nil {
			if derr := undoAddPod(p.s.nl, p.cfg.HostVethName, undoAddr); derr != nil {
				d.log.Warn("undo partial pod wiring", "veth", p.cfg.HostVethName, "addr", cfg.Addr, "err", derr)
			}
		}
	}()
	if err := cfg.validate(); err != nil {
		return PodLinks{}, err
	}
	if cfg.NetNS != p.cfg.NetNS || cfg.IfName != p.cfg.IfName || cfg.HostVethName != p.cfg.HostVethName || cfg.IPv6 != p.cfg.IPv6 {
		return PodLinks{}, fmt.Errorf("wire pod: config for %s %s (host veth %s) does not match the veth made for %s %s (host veth %s)",
			cfg.NetNS, cfg.IfName, cfg.HostVethName, p.cfg.NetNS, p.cfg.IfName, p.cfg.HostVethName)
	}
	undoAddr = cfg.Addr
	if err := ctx.Err(); err != nil {
		return PodLinks{}, err
	}
	if mtu := orDefaultMTU(cfg.MTU); mtu != p.cfg.MTU {
		if err := p.s.nl.linkSetMTU(p.host, mtu); err != nil {
			return PodLinks{}, fmt.Errorf("set MTU %d on host veth %s: %w", mtu, cfg.HostVethName, err)
		}
		if err := p.podNL.linkSetMTU(p.pod, mtu); err != nil {
			return PodLinks{}, fmt.Errorf("set MTU %d on %s in %s: %w", mtu, cfg.IfName, cfg.NetNS, err)
		}
	}
	addr := &netlink.Addr{IPNet: ipNet(host(cfg.Addr))}
	if cfg.IPv6 {
		// No duplicate address detection (see prewirePodSide6): the
		// flag says so for this address whatever the interface's
		// accept_dad became since.
		addr.Flags = unix.IFA_F_NODAD
	}
	if err := p.podNL.addrAdd(p.pod, addr); err != nil {
		return PodLinks{}, fmt.Errorf("add %s to %s in %s: %w", cfg.Addr, cfg.IfName, cfg.NetNS, err)
	}
	if err := ctx.Err(); err != nil {
		return PodLinks{}, err
	}
	if err := wireHostSide(p.s.nl, cfg, p.host); err != nil {
		return PodLinks{}, err
	}
	d.log.Info("pod wired", "veth", cfg.HostVethName, "addr", cfg.Addr, "table", cfg.RouteTable, "netns", cfg.NetNS)
	return PodLinks{Host: linkOf(p.host), Pod: linkOf(p.pod)}, nil
}

var errNoLink = errors.New("link does not exist")

func wireHostSide(nl *nlHandle, cfg PodConfig, hostLink netlink.Link) error {
	if err := nl.routeReplace(&netlink.Route{
		LinkIndex: hostLink.Attrs().Index, Dst: ipNet(host(cfg.Addr)),
		Scope: netlink.SCOPE_LINK, Table: mainTable,
	}); err != nil {
		return fmt.Errorf("add route %s dev %s: %w", cfg.Addr, cfg.HostVethName, err)
	}
	have, err := nl.rulesOf(cfg.Addr)
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

// undoAddPod removes the host veth (which takes the pod end and the host
// route with it) and the rules of addr, if valid.
func undoAddPod(nl *nlHandle, hostVeth string, addr netip.Addr) error {
	var errs []error
	if l, err := nl.linkByName(hostVeth); err != nil {
		errs = append(errs, err)
	} else if l != nil {
		if err := nl.linkDel(l); err != nil && !isNotExist(err) {
			errs = append(errs, fmt.Errorf("delete host veth %s: %w", hostVeth, err))
		}
	}
	errs = append(errs, deletePodRules(nl, addr))
	return errors.Join(errs...)
}

func linkOf(l netlink.Link) Link {
	a := l.Attrs()
	return Link{Name: a.Name, MAC: a.HardwareAddr, Index: a.Index}
}
