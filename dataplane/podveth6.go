package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
)

// hostVethIPv6 sets an IPv6 pod's host veth as aws-node does
// (setHostVethV6Sysctls), before the link comes up so it is never up
// while it would still take a router advertisement from the pod side:
// no router advertisements, redirects accepted, no forwarding on the
// link itself (the node forwards through net.ipv6.conf.all). And no
// duplicate address detection, unlike aws-node: the veth's link-local
// address, the source of its neighbour solicitations to the pod, is then
// usable at once instead of a second or more after ADD (a link has one
// other end, which cannot hold the same link-local address).
func hostVethIPv6(s *session, name string) error {
	for _, kv := range [][2]string{{"accept_ra", "0"}, {"accept_redirects", "1"}, {"forwarding", "0"}, {"accept_dad", "0"}} {
		if err := s.setSysctl(fmt.Sprintf("net.ipv6.conf.%s.%s", name, kv[0]), kv[1]); err != nil {
			return fmt.Errorf("host veth %s: %w", name, err)
		}
	}
	return nil
}

// prewirePodSide6 is prewirePodSide for an IPv6 pod, as aws-node wires
// one: IPv6 on (on the interface and lo, which a runtime may have turned
// off), a link route to PodGateway6, the default route through it and a
// permanent neighbour entry for it with the host veth's MAC. No IPv4
// route: IPv4 egress is another plugin's (ENABLE_V4_EGRESS). Duplicate
// address detection is off on the interface, where aws-node waits for it
// (WaitForAddressesToBeStable, up to 10 s): the pod's addresses answer
// the host's neighbour solicitations at once, and none can be a
// duplicate (the agent gives each global address to one pod; the
// link-local one has only the host veth beside it).
func prewirePodSide6(podNS ns.NetNS, nl *nlHandle, cfg PodConfig, hostMAC net.HardwareAddr) (netlink.Link, error) {
	l, err := nl.linkByName(cfg.IfName)
	if err != nil || l == nil {
		return nil, fmt.Errorf("find %s in %s: %w", cfg.IfName, cfg.NetNS, errors.Join(err, errNoLink))
	}
	if err := podNS.Do(func(ns.NetNS) error {
		for _, kv := range [][2]string{
			{"net.ipv6.conf." + cfg.IfName + ".disable_ipv6", "0"},
			{"net.ipv6.conf.lo.disable_ipv6", "0"},
			{"net.ipv6.conf." + cfg.IfName + ".accept_dad", "0"},
		} {
			if _, err := sysctl.Sysctl(kv[0], kv[1]); err != nil {
				return fmt.Errorf("set sysctl %s=%s: %w", kv[0], kv[1], err)
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("enable IPv6 in %s: %w", cfg.NetNS, err)
	}
	if err := nl.linkSetUp(l); err != nil {
		return nil, fmt.Errorf("set %s up in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	gw := PodGateway6()
	idx := l.Attrs().Index
	for _, r := range []*netlink.Route{
		{LinkIndex: idx, Dst: ipNet(host(gw)), Scope: netlink.SCOPE_LINK},
		{LinkIndex: idx, Dst: ipNet(netip.PrefixFrom(netip.IPv6Unspecified(), 0)), Gw: gw.AsSlice()},
	} {
		if err := nl.routeReplace(r); err != nil {
			return nil, fmt.Errorf("add route %s in %s: %w", r, cfg.NetNS, err)
		}
	}
	if err := nl.neighSet(&netlink.Neigh{
		LinkIndex: idx, Family: netlink.FAMILY_V6, State: netlink.NUD_PERMANENT,
		IP: gw.AsSlice(), HardwareAddr: hostMAC,
	}); err != nil {
		return nil, fmt.Errorf("add neighbour %s lladdr %s in %s: %w", gw, hostMAC, cfg.NetNS, err)
	}
	return l, nil
}
