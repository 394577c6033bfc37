package dataplane

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// IPv4 egress of IPv6 pods, the Amazon VPC CNI's egress-cni plugin in its
// IPv4 mode (ENABLE_V4_EGRESS): a second veth gives the pod a node-local
// IPv4 address (169.254.172.0/22 by default, from host-local IPAM) and a
// route for IPv4 destinations through the node, which SNATs that traffic to
// its primary IPv4 address. The pod's side is aws-node's, so a pod keeps
// the same interface, address and routes whichever plugin wired it, and
// vpcnet's DEL removes a pod aws-node wired (its v4if0 and address):
//
//   - pod side: IfName (v4if0) holds the address with its subnet's length,
//     a link route to the gateway, the subnet via the gateway, and the IPAM
//     routes (0.0.0.0/0) via the gateway;
//   - host side: the veth holds the gateway as a /32 of link scope (so it
//     answers the pod's ARP for it) and a /32 link route to the pod;
//   - SNAT: table ip vpcnet-egress-v4 (egress4nft.go).

// EgressV4Config describes one pod's IPv4 egress interface.
type EgressV4Config struct {
	// NetNS is the path of the pod's network namespace.
	NetNS string
	// IfName is the egress interface in the pod (aws-node's v4if0).
	IfName string
	// HostVethName is the host end (EgressV4VethName).
	HostVethName string
	// Addr is the pod's egress address with its subnet's length
	// (169.254.172.5/22), as IPAM gave it.
	Addr netip.Prefix
	// Gateway is the next hop in the pod, held by the host veth.
	Gateway netip.Addr
	// Routes are the pod's routes via Gateway (IPAM's, 0.0.0.0/0).
	Routes []netip.Prefix
	// MTU of both veth ends; 0 means DefaultMTU.
	MTU int
	// SNAT is the node address and port choice the pod is SNATed with.
	SNAT EgressSNAT
	// Owner names the attachment in the SNAT set, so that a DEL whose
	// pod namespace is already gone still finds the pod's address.
	Owner string
}

// EgressSNAT is how the node rewrites its pods' IPv4 egress.
type EgressSNAT struct {
	// NodeIP is the node's primary IPv4 address.
	NodeIP netip.Addr
	// Ports is how SNAT picks source ports (randomizeSNAT); empty means
	// SNATPortsFullyRandom.
	Ports SNATPorts
}

// EgressV4Owner names an attachment ("<network>/<container>/<ifname>",
// CNI's attachment key) in the SNAT set's comments. None of the three
// may hold a "/" (CNI's rules for container IDs and interface names,
// netfacts' for network names), so the name splits back into them.
func EgressV4Owner(network, containerID, ifName string) string {
	return network + "/" + containerID + "/" + ifName
}

// EgressV4VethName is the host veth of an attachment: "v4" and the first
// 13 hex digits of sha1 of its EgressV4Owner. aws-node's name is random;
// a name of the attachment lets CHECK, DEL and GC find it, an interrupted
// ADD's be replaced, and never names another pod's veth.
func EgressV4VethName(network, containerID, ifName string) string {
	return egressVethOf(EgressV4Owner(network, containerID, ifName))
}

func egressVethOf(owner string) string {
	sum := sha1.Sum([]byte(owner))
	return "v4" + hex.EncodeToString(sum[:])[:13]
}

func (c EgressV4Config) validate() error {
	if c.NetNS == "" {
		return errors.New("egress config: network namespace path is empty")
	}
	if err := validIfName(c.IfName); err != nil {
		return fmt.Errorf("egress config: pod interface: %w", err)
	}
	if err := validIfName(c.HostVethName); err != nil {
		return fmt.Errorf("egress config: host veth: %w", err)
	}
	if err := validMTU(c.MTU); err != nil {
		return fmt.Errorf("egress config: %w", err)
	}
	if !c.Addr.IsValid() || !c.Addr.Addr().Is4() || c.Addr.Bits() == 0 {
		return fmt.Errorf("egress config: pod address %s is not an IPv4 address with a subnet length", c.Addr)
	}
	if !c.Gateway.Is4() || c.Gateway == c.Addr.Addr() || !c.Addr.Masked().Contains(c.Gateway) {
		return fmt.Errorf("egress config: gateway %s is not another address in %s", c.Gateway, c.Addr.Masked())
	}
	for _, r := range c.Routes {
		if !r.IsValid() || !r.Addr().Is4() {
			return fmt.Errorf("egress config: route %s is not an IPv4 prefix", r)
		}
	}
	return c.SNAT.validate()
}

func (s EgressSNAT) validate() error {
	if !s.NodeIP.Is4() || s.NodeIP.IsUnspecified() || s.NodeIP.IsLoopback() || s.NodeIP.IsMulticast() {
		return fmt.Errorf("egress config: node IP %s is not a usable IPv4 address", s.NodeIP)
	}
	switch s.Ports {
	case "", SNATPortsFullyRandom, SNATPortsRandom, SNATPortsSequential:
		return nil
	}
	return fmt.Errorf("egress config: SNAT port mode %q: want prng, hashrandom or none", s.Ports)
}

// AddEgressV4 wires a pod's IPv4 egress: the veth pair with the pod end
// made in the pod's namespace, both sides' addresses and routes, IPv4
// forwarding on the node, and the pod's address in the SNAT set. A host
// veth of the same name, left by an interrupted ADD of the same
// attachment, is replaced. On error whatever it made is removed again.
func (d *Dataplane) AddEgressV4(ctx context.Context, cfg EgressV4Config) (_ PodLinks, err error) {
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
	if err := s.nl.linkAdd(&netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: cfg.HostVethName, MTU: mtu},
		PeerName:  cfg.IfName, PeerMTU: uint32(mtu), PeerNamespace: netlink.NsFd(int(podNS.Fd())),
	}); err != nil {
		return PodLinks{}, fmt.Errorf("create veth %s with peer %s in %s: %w", cfg.HostVethName, cfg.IfName, cfg.NetNS, err)
	}
	defer func() {
		if err != nil {
			if derr := d.undoEgressV4(s, cfg); derr != nil {
				d.log.Warn("undo partial egress wiring", "veth", cfg.HostVethName, "err", derr)
			}
		}
	}()
	hostLink, err := s.nl.linkByName(cfg.HostVethName)
	if err != nil || hostLink == nil {
		return PodLinks{}, fmt.Errorf("find new host veth %s: %w", cfg.HostVethName, errors.Join(err, errNoLink))
	}
	podLink, err := podNL.linkByName(cfg.IfName)
	if err != nil || podLink == nil {
		return PodLinks{}, fmt.Errorf("find %s in %s: %w", cfg.IfName, cfg.NetNS, errors.Join(err, errNoLink))
	}
	if err := wireEgressPodSide(podNL, cfg, podLink); err != nil {
		return PodLinks{}, err
	}
	if err := wireEgressHostSide(s.nl, cfg, hostLink); err != nil {
		return PodLinks{}, err
	}
	if err := ctx.Err(); err != nil {
		return PodLinks{}, err
	}
	// aws-node's plugin turns forwarding on at every ADD too: without it
	// the node drops the pod's packets, and nothing else may have set it
	// on a node whose own pods are IPv6.
	if err := s.setSysctl("net/ipv4/ip_forward", "1"); err != nil {
		return PodLinks{}, err
	}
	nft, err := s.nftables()
	if err != nil {
		return PodLinks{}, err
	}
	if err := addEgressSNAT(nft, cfg.SNAT, cfg.Addr.Addr(), cfg.Owner); err != nil {
		return PodLinks{}, err
	}
	d.log.Info("pod egress wired", "veth", cfg.HostVethName, "addr", cfg.Addr, "netns", cfg.NetNS, "snat", cfg.SNAT.NodeIP)
	return PodLinks{Host: linkOf(hostLink), Pod: linkOf(podLink)}, nil
}

// wireEgressPodSide gives the pod end its address and routes. The address
// keeps its subnet's length but without the kernel's subnet route
// (IFA_F_NOPREFIXROUTE): aws-node adds the address and deletes that route,
// since every other address of the subnet is another pod, reached through
// the gateway.
func wireEgressPodSide(nl *nlHandle, cfg EgressV4Config, l netlink.Link) error {
	if err := nl.linkSetUp(l); err != nil {
		return fmt.Errorf("set %s up in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	if err := nl.addrAdd(l, &netlink.Addr{IPNet: ipNet(cfg.Addr), Flags: unix.IFA_F_NOPREFIXROUTE}); err != nil {
		return fmt.Errorf("add %s to %s in %s: %w", cfg.Addr, cfg.IfName, cfg.NetNS, err)
	}
	for _, r := range egressPodRoutes(cfg, l.Attrs().Index) {
		if err := nl.routeReplace(r); err != nil {
			return fmt.Errorf("add route %s in %s: %w", r, cfg.NetNS, err)
		}
	}
	return nil
}

// egressPodRoutes are aws-node's routes in the pod: the gateway on the
// link, the subnet via the gateway, then IPAM's routes via the gateway.
func egressPodRoutes(cfg EgressV4Config, index int) []*netlink.Route {
	src, gw := cfg.Addr.Addr().AsSlice(), cfg.Gateway.AsSlice()
	out := []*netlink.Route{
		{LinkIndex: index, Dst: ipNet(host(cfg.Gateway)), Scope: netlink.SCOPE_LINK, Src: src},
		{LinkIndex: index, Dst: ipNet(cfg.Addr.Masked()), Gw: gw, Src: src},
	}
	for _, r := range cfg.Routes {
		if r.Masked() == cfg.Addr.Masked() {
			continue // the subnet route above
		}
		out = append(out, &netlink.Route{LinkIndex: index, Dst: ipNet(r.Masked()), Gw: gw})
	}
	return out
}

func wireEgressHostSide(nl *nlHandle, cfg EgressV4Config, l netlink.Link) error {
	if err := nl.linkSetUp(l); err != nil {
		return fmt.Errorf("set host veth %s up: %w", cfg.HostVethName, err)
	}
	if err := nl.addrAdd(l, &netlink.Addr{IPNet: ipNet(host(cfg.Gateway)), Scope: int(netlink.SCOPE_LINK)}); err != nil {
		return fmt.Errorf("add %s to host veth %s: %w", cfg.Gateway, cfg.HostVethName, err)
	}
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(host(cfg.Addr.Addr())), Scope: netlink.SCOPE_LINK, Table: mainTable}
	if err := nl.routeReplace(r); err != nil {
		return fmt.Errorf("add route %s dev %s: %w", cfg.Addr.Addr(), cfg.HostVethName, err)
	}
	return nil
}

// undoEgressV4 removes a partial ADD: the host veth (the pod end, the
// host route and the gateway address go with it) and the SNAT element.
func (d *Dataplane) undoEgressV4(s *session, cfg EgressV4Config) error {
	var errs []error
	if l, err := s.nl.linkByName(cfg.HostVethName); err != nil {
		errs = append(errs, err)
	} else if l != nil {
		if err := s.nl.linkDel(l); err != nil && !isNotExist(err) {
			errs = append(errs, fmt.Errorf("delete host veth %s: %w", cfg.HostVethName, err))
		}
	}
	if nft, err := s.nftables(); err != nil {
		errs = append(errs, err)
	} else if _, err := delEgressSNAT(nft, []netip.Addr{cfg.Addr.Addr()}, cfg.Owner); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
