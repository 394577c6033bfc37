package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

// HostConfig is the node-wide part of the dataplane.
type HostConfig struct {
	// PrimaryMAC finds the primary ENI's interface; PrimaryInterface names
	// it instead when the MAC is empty.
	PrimaryMAC       net.HardwareAddr
	PrimaryInterface string
	// PrimaryIP is the node's primary private address, the SNAT source.
	PrimaryIP netip.Addr
	// VPCCIDRs are the VPC's IPv4 CIDR blocks; traffic to them keeps the
	// pod's address.
	VPCCIDRs []netip.Prefix
	// ExcludeSNATCIDRs are further destinations that keep the pod's address
	// (AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS).
	ExcludeSNATCIDRs []netip.Prefix
	// ExternalSNAT leaves SNAT to a NAT gateway (AWS_VPC_K8S_CNI_EXTERNALSNAT).
	ExternalSNAT bool
	// MTU of the primary interface; 0 leaves it as it is.
	MTU int
	// Connmark is the mark for connections that entered on the primary
	// interface (AWS_VPC_K8S_CNI_CONNMARK); 0 means DefaultConnmark.
	Connmark uint32
	// SNATPorts is how SNAT picks source ports
	// (AWS_VPC_K8S_CNI_RANDOMIZESNAT); empty means SNATPortsFullyRandom.
	SNATPorts SNATPorts
	// DenyPodIMDS drops packets from pods to the instance metadata
	// service, 169.254.169.254 and fd00:ec2::254 (VPCNET_POD_IMDS=deny),
	// so pods cannot take the node's IAM role.
	DenyPodIMDS bool
	// IPv6 sets the node up for IPv6 pods as aws-node's IPv6 mode does
	// (host6.go): IPv6 forwarding, no SNAT or connmark rules (VPCCIDRs,
	// ExcludeSNATCIDRs, ExternalSNAT, SNATPorts and Connmark are then
	// unused), and the pods' IPv4 egress addresses kept node-local.
	IPv6 bool
}

// SNATPorts names how SNAT picks source ports, with the Amazon VPC CNI's
// values.
type SNATPorts string

const (
	// SNATPortsFullyRandom draws every source port at random (nftables
	// fully-random, iptables --random-fully): no collisions between nodes
	// SNATing to the same destination through one NAT.
	SNATPortsFullyRandom SNATPorts = "prng"
	// SNATPortsRandom randomises the port by a hash (--random).
	SNATPortsRandom SNATPorts = "hashrandom"
	// SNATPortsSequential keeps the kernel's default port choice.
	SNATPortsSequential SNATPorts = "none"
)

func (c HostConfig) validate() error {
	switch c.SNATPorts {
	case "", SNATPortsFullyRandom, SNATPortsRandom, SNATPortsSequential:
	default:
		return fmt.Errorf("host config: SNAT port mode %q: want prng, hashrandom or none", c.SNATPorts)
	}
	if len(c.PrimaryMAC) == 0 && c.PrimaryInterface == "" {
		return errors.New("host config: neither the primary ENI's MAC nor its interface name is set")
	}
	if !c.PrimaryIP.Is4() {
		return fmt.Errorf("host config: primary IP %q is not an IPv4 address", c.PrimaryIP)
	}
	if len(c.VPCCIDRs) == 0 && !c.ExternalSNAT && !c.IPv6 {
		return errors.New("host config: no VPC CIDR: without one every pod connection would be SNATed")
	}
	for _, p := range append(append([]netip.Prefix{}, c.VPCCIDRs...), c.ExcludeSNATCIDRs...) {
		if !p.IsValid() || !p.Addr().Is4() || p.Bits() == 0 {
			return fmt.Errorf("host config: CIDR %q is not an IPv4 CIDR narrower than /0", p)
		}
	}
	if err := validMTU(c.MTU); err != nil {
		return fmt.Errorf("host config: %w", err)
	}
	return nil
}

// SetupHost configures node-wide networking and converges on cfg when run
// again: IPv4 forwarding, loose reverse-path filtering on the primary
// interface, its MTU, rule 1024 (fwmark lookup main), and table ip vpcnet;
// on an IPv6 node what host6.go says instead. Running it twice with the
// same cfg changes nothing the second time.
func (d *Dataplane) SetupHost(ctx context.Context, cfg HostConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Connmark == 0 {
		cfg.Connmark = DefaultConnmark
	}
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()

	link, err := primaryLink(s.nl, cfg)
	if err != nil {
		return err
	}
	name := link.Attrs().Name
	if cfg.MTU != 0 && link.Attrs().MTU != cfg.MTU {
		if err := s.nl.linkSetMTU(link, cfg.MTU); err != nil {
			return fmt.Errorf("set MTU %d on primary interface %s: %w", cfg.MTU, name, err)
		}
	}
	if cfg.IPv6 {
		return d.setupHost6(ctx, s, cfg, name)
	}
	if err := s.setSysctl("net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	// Replies to NodePort traffic and SNATed pod traffic arrive on the
	// primary interface for addresses routed elsewhere: strict reverse-path
	// filtering would drop them.
	if err := s.setSysctl("net.ipv4.conf."+name+".rp_filter", "2"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ensureMarkRule(s.nl, cfg.Connmark); err != nil {
		return err
	}
	return d.writeHostTables(s, cfg, name, desiredChains)
}

// writeHostTables makes table ip vpcnet the chains the node's family
// gives for its rules (desiredChains, ipv6NodeChains), then table ip6
// vpcnet's pod-IMDS deny.
func (d *Dataplane) writeHostTables(s *session, cfg HostConfig, primaryIf string, chains func(hostRules) []chainSpec) error {
	nft, err := s.nftables()
	if err != nil {
		return err
	}
	r := d.hostRules(cfg, primaryIf)
	changed, err := reconcileTable(nft, nftables.TableFamilyIPv4, chains(r))
	if err != nil {
		return err
	}
	if changed {
		d.log.Info("host nftables rules written", "table", "ip "+TableName, "primary", primaryIf, "ipv6Pods", cfg.IPv6,
			"externalSNAT", cfg.ExternalSNAT, "vpcCIDRs", cfg.VPCCIDRs, "denyPodIMDS", cfg.DenyPodIMDS)
	}
	return d.reconcileIMDS6(nft, r)
}

func (d *Dataplane) hostRules(cfg HostConfig, primaryIf string) hostRules {
	return hostRules{
		primaryIf: primaryIf, primaryIP: cfg.PrimaryIP,
		vpcCIDRs: cfg.VPCCIDRs, excluded: cfg.ExcludeSNATCIDRs,
		externalSNAT: cfg.ExternalSNAT, vethPrefix: d.vethPrefix, mark: cfg.Connmark,
		snatPorts: cfg.SNATPorts, denyPodIMDS: cfg.DenyPodIMDS,
	}
}

// reconcileIMDS6 makes table ip6 vpcnet the pod-IMDS deny of
// fd00:ec2::254, or nothing.
func (d *Dataplane) reconcileIMDS6(nft *nftConn, r hostRules) error {
	changed, err := reconcileTable(nft, nftables.TableFamilyIPv6, podIMDSChains(r, imdsV6))
	if err != nil {
		return err
	}
	if changed {
		d.log.Info("host nftables rules written", "table", "ip6 "+TableName, "denyPodIMDS", r.denyPodIMDS)
	}
	return nil
}

// setupHost6 is SetupHost's part on an IPv6 node (host6.go).
func (d *Dataplane) setupHost6(ctx context.Context, s *session, cfg HostConfig, primaryIf string) error {
	for _, kv := range ipv6Sysctls(primaryIf) {
		if err := s.setSysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// An IPv4 node's rule 1024 would route by a mark nothing sets here.
	have, err := s.nl.rules()
	if err != nil {
		return err
	}
	if err := deleteRules(s.nl, have, isMarkRule); err != nil {
		return err
	}
	return d.writeHostTables(s, cfg, primaryIf, ipv6NodeChains)
}

// TeardownHost removes tables ip and ip6 vpcnet, ip and ip6 vpcnet-hostport and rule 1024. Pod and ENI state is
// left alone: pods keep working within the VPC.
func (d *Dataplane) TeardownHost(ctx context.Context) error {
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	have, err := s.nl.rules()
	if err != nil {
		return err
	}
	if err := deleteRules(s.nl, have, isMarkRule); err != nil {
		return err
	}
	nft, err := s.nftables()
	if err != nil {
		return err
	}
	if _, err := deleteTable(nft, nftables.TableFamilyIPv4); err != nil {
		return err
	}
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		if _, err := deleteNamedTable(nft, fam, HostPortTable); err != nil {
			return err
		}
	}
	_, err = deleteTable(nft, nftables.TableFamilyIPv6)
	return err
}

func primaryLink(nl *nlHandle, cfg HostConfig) (netlink.Link, error) {
	if len(cfg.PrimaryMAC) != 0 {
		l, err := nl.linkByMAC(cfg.PrimaryMAC)
		if err != nil {
			return nil, fmt.Errorf("find primary interface: %w", err)
		}
		if l == nil {
			return nil, fmt.Errorf("no interface has the primary ENI's MAC %s: check the MAC reported by IMDS", cfg.PrimaryMAC)
		}
		return l, nil
	}
	l, err := nl.linkByName(cfg.PrimaryInterface)
	if err != nil {
		return nil, fmt.Errorf("find primary interface %s: %w", cfg.PrimaryInterface, err)
	}
	if l == nil {
		return nil, fmt.Errorf("primary interface %s does not exist", cfg.PrimaryInterface)
	}
	return l, nil
}

// isMarkRule recognises rule 1024 whatever mark it was written with, so a
// changed AWS_VPC_K8S_CNI_CONNMARK replaces the old rule.
func isMarkRule(r ipRule) bool {
	return r.priority == MainMarkPriority && r.table == mainTable && r.mask != 0 &&
		!r.src.IsValid() && !r.dst.IsValid()
}

func ensureMarkRule(nl *nlHandle, mark uint32) error {
	want := ipRule{priority: MainMarkPriority, mark: mark, mask: mark, table: mainTable}
	have, err := nl.rules()
	if err != nil {
		return err
	}
	if err := deleteRules(nl, have, func(r ipRule) bool { return isMarkRule(r) && r != want }); err != nil {
		return err
	}
	return ensureRule(nl, have, want)
}
