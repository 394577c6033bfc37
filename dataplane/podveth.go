package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// PrewiredPod is a pod's veth pair made before the pod has an address, so
// that the plugin can make it while the agent is still choosing one. It
// holds kernel handles until WirePod or Remove, one of which must follow;
// it is for one goroutine at a time.
type PrewiredPod struct {
	// cfg is the namespace, interface and host veth the veth was made
	// for, and the MTU it was made with (never 0).
	cfg       PodConfig
	s         *session
	podNS     ns.NetNS
	podNL     *nlHandle
	host, pod netlink.Link
	// spent is set once WirePod or Remove has taken the veth.
	spent bool
}

// PrewirePod does the part of AddPod that needs no address: it replaces a
// stale host veth of the same name, creates the veth pair with the pod end
// in the pod's namespace and cfg.MTU on both ends, sets both up, and gives
// the pod its link route and default route to PodGateway and the permanent
// neighbour entry for it. Addr and RouteTable are not used.
//
// When the pod's namespace already has cfg.IfName it fails before touching
// anything: an earlier ADD wired that pod, and the host veth of the same
// name, which would otherwise be replaced as stale, is the live pod's. On
// error nothing PrewirePod created is left.
func (d *Dataplane) PrewirePod(ctx context.Context, cfg PodConfig) (_ *PrewiredPod, err error) {
	if err := cfg.validateVeth(); err != nil {
		return nil, err
	}
	s, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	p := &PrewiredPod{s: s, cfg: PodConfig{
		NetNS: cfg.NetNS, IfName: cfg.IfName, HostVethName: cfg.HostVethName, MTU: orDefaultMTU(cfg.MTU), IPv6: cfg.IPv6,
	}}
	defer func() {
		if err != nil {
			p.release()
		}
	}()
	if p.podNS, err = openPodNS(cfg.NetNS); err != nil {
		return nil, err
	}
	if p.podNL, err = newNL(p.podNS); err != nil {
		return nil, err
	}
	if existing, err := p.podNL.linkByName(cfg.IfName); err != nil {
		return nil, fmt.Errorf("look for %s in %s: %w", cfg.IfName, cfg.NetNS, err)
	} else if existing != nil {
		return nil, fmt.Errorf("pod network namespace %s already has an interface %s", cfg.NetNS, cfg.IfName)
	}
	if err := replaceStaleVeth(s.nl, cfg.HostVethName); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: cfg.HostVethName, MTU: p.cfg.MTU},
		PeerName:      cfg.IfName,
		PeerMTU:       uint32(p.cfg.MTU),
		PeerNamespace: netlink.NsFd(int(p.podNS.Fd())),
	}
	if err := s.nl.linkAdd(veth); err != nil {
		return nil, fmt.Errorf("create veth %s with peer %s in %s: %w", cfg.HostVethName, cfg.IfName, cfg.NetNS, err)
	}
	defer func() {
		if err != nil {
			if derr := undoAddPod(s.nl, cfg.HostVethName, netip.Addr{}); derr != nil {
				d.log.Warn("undo partial pod veth", "veth", cfg.HostVethName, "err", derr)
			}
		}
	}()
	if p.host, err = s.nl.linkByName(cfg.HostVethName); err != nil || p.host == nil {
		return nil, fmt.Errorf("find new host veth %s: %w", cfg.HostVethName, errors.Join(err, errNoLink))
	}
	if cfg.IPv6 {
		if err := hostVethIPv6(s, cfg.HostVethName); err != nil {
			return nil, err
		}
	}
	if err := s.nl.linkSetUp(p.host); err != nil {
		return nil, fmt.Errorf("set host veth %s up: %w", cfg.HostVethName, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prewire := prewirePodSide
	if cfg.IPv6 {
		prewire = func(nl *nlHandle, cfg PodConfig, mac net.HardwareAddr) (netlink.Link, error) {
			return prewirePodSide6(p.podNS, nl, cfg, mac)
		}
	}
	if p.pod, err = prewire(p.podNL, cfg, p.host.Attrs().HardwareAddr); err != nil {
		return nil, err
	}
	return p, nil
}

// Remove deletes a prewired veth that will not be wired, as when the agent
// had no address for the pod. It does nothing once WirePod or Remove has
// run.
func (p *PrewiredPod) Remove() error {
	if p.spent {
		return nil
	}
	p.spent = true
	defer p.release()
	if err := undoAddPod(p.s.nl, p.cfg.HostVethName, netip.Addr{}); err != nil {
		return fmt.Errorf("remove prewired veth %s: %w", p.cfg.HostVethName, err)
	}
	return nil
}

// release closes the handles; the veth stays as it is.
func (p *PrewiredPod) release() {
	if p.podNL != nil {
		p.podNL.close()
	}
	if p.podNS != nil {
		_ = p.podNS.Close()
	}
	p.s.close()
}

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

// prewirePodSide sets the pod interface up and routes it through
// PodGateway, which needs no address: the kernel accepts a link route and a
// gateway route on an up link that has none, and the pod's processes, which
// would need one, start only after ADD.
func prewirePodSide(nl *nlHandle, cfg PodConfig, hostMAC net.HardwareAddr) (netlink.Link, error) {
	l, err := nl.linkByName(cfg.IfName)
	if err != nil || l == nil {
		return nil, fmt.Errorf("find %s in %s: %w", cfg.IfName, cfg.NetNS, errors.Join(err, errNoLink))
	}
	if err := nl.linkSetUp(l); err != nil {
		return nil, fmt.Errorf("set %s up in %s: %w", cfg.IfName, cfg.NetNS, err)
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
