package dataplane

import (
	"context"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/vpcnet/vpcnet/hostport"
)

// HostPortTable is the nftables table of the pods' hostPorts, family ip
// for IPv4 pods and ip6 for IPv6 pods (ENABLE_IPv6), apart from TableName
// so that either is rewritten without the other.
const HostPortTable = "vpcnet-hostport"

// ipsDstNAT is the conntrack status bit of a connection whose destination
// was rewritten (IPS_DST_NAT).
const ipsDstNAT = 1 << 5

// SetHostPorts makes the node's hostPort rules exactly entries, in one
// transaction; none removes the table. A packet to one of the node's own
// addresses (from outside, or from the node itself) on a mapped port is
// sent to the pod, and a pod that reaches its own hostPort gets its
// answers back (hairpin), as the reference portmap plugin does with
// "snat": true. Replies to connections that came in on the primary
// interface leave by it: the host rules mark them (see hostRules).
func (d *Dataplane) SetHostPorts(ctx context.Context, entries []hostport.Entry) error {
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	nft, err := s.nftables()
	if err != nil {
		return err
	}
	var v4, v6 []hostport.Entry
	for _, e := range entries {
		if e.Addr.Is6() {
			v6 = append(v6, e)
		} else {
			v4 = append(v4, e)
		}
	}
	for _, f := range []struct {
		fam     nftables.TableFamily
		entries []hostport.Entry
	}{{nftables.TableFamilyIPv4, v4}, {nftables.TableFamilyIPv6, v6}} {
		changed, err := reconcileNamedTable(nft, f.fam, HostPortTable, hostPortChains(f.entries))
		if err != nil {
			return err
		}
		if changed {
			d.log.Info("hostPort rules written", "table", familyName(f.fam)+" "+HostPortTable, "pods", len(f.entries))
		}
	}
	return nil
}

// hostPortChains are the rules of entries, all of one family. IPv6 pods
// get the same rules but one: the node cannot reach them by
// [::1]:hostPort, since IPv6 never routes a loopback source out of the
// node (there is no route_localnet), as with portmap.
func hostPortChains(entries []hostport.Entry) []chainSpec {
	if len(entries) == 0 {
		return nil
	}
	const chainPorts = "hostports"
	toLocal := ruleSpec{"to the node's own addresses", concat(daddrLocal(false), jump(chainPorts))}
	pre := chainSpec{name: "prerouting", hook: nftables.ChainHookPrerouting, priority: *nftables.ChainPriorityNATDest,
		typ: nftables.ChainTypeNAT, rules: []ruleSpec{toLocal}}
	out := chainSpec{name: "output", hook: nftables.ChainHookOutput, priority: *nftables.ChainPriorityNATDest,
		typ: nftables.ChainTypeNAT, rules: []ruleSpec{toLocal}}
	post := chainSpec{name: "postrouting", hook: nftables.ChainHookPostrouting, priority: *nftables.ChainPriorityNATSource,
		typ: nftables.ChainTypeNAT}
	ports := chainSpec{name: chainPorts}
	for _, e := range entries {
		for _, m := range e.Mappings {
			var match []expr.Any
			if m.HostIP.IsValid() {
				match = daddrOf(m.HostIP)
			}
			ports.rules = append(ports.rules, ruleSpec{
				comment: fmt.Sprintf("%s of pod %s", m, e.Pod),
				exprs:   concat(match, l4proto(m.Protocol), dport(m.HostPort), dnatTo(e.Addr, m.ContainerPort)),
			})
		}
		if e.Addr.Is6() {
			post.rules = append(post.rules, ruleSpec{
				comment: fmt.Sprintf("pod %s reaching its own hostPort", e.Pod),
				exprs:   concat(saddr6Is(e.Addr), daddr6Is(e.Addr), ctStatusHas(ipsDstNAT), masquerade()),
			})
			continue
		}
		post.rules = append(post.rules, ruleSpec{
			comment: fmt.Sprintf("pod %s reaching its own hostPort", e.Pod),
			exprs:   concat(saddrIs(e.Addr.As4()), daddrIn(host(e.Addr)), ctStatusHas(ipsDstNAT), masquerade()),
		}, ruleSpec{
			comment: fmt.Sprintf("the node reaching pod %s by 127.0.0.1:hostPort", e.Pod),
			exprs:   concat(saddrIs([4]byte{127, 0, 0, 1}), daddrIn(host(e.Addr)), ctStatusHas(ipsDstNAT), masquerade()),
		})
	}
	return []chainSpec{pre, out, ports, post}
}

// AllowLocalnet lets packets from 127/8 be routed out of a pod's host
// veth (route_localnet), which 127.0.0.1:hostPort needs once the output
// chain has sent it to the pod; the postrouting chain then masquerades
// them, as portmap does with "snat": true.
func (d *Dataplane) AllowLocalnet(ctx context.Context, hostVeth string) error {
	if err := validIfName(hostVeth); err != nil {
		return fmt.Errorf("host veth: %w", err)
	}
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	return s.setSysctl("net.ipv4.conf."+hostVeth+".route_localnet", "1")
}

// ForgetUDPFlows deletes the node's conntrack entries of UDP flows to
// ports, as portmap does after adding a mapping: a UDP client that sent
// to a host port before its rules existed has a flow conntrack keeps
// un-NATed (or NATed to an old pod), and its packets would never reach
// the new one.
func (d *Dataplane) ForgetUDPFlows(ctx context.Context, ports []uint16) error {
	if len(ports) == 0 {
		return nil
	}
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	return forgetUDPFlows(s.ns, ports)
}
