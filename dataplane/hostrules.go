package dataplane

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// ownerComment starts the comment of every nftables rule we write, so any
// reader (and `nft list ruleset`) can tell whose rule it is.
const ownerComment = "vpcnet: "

// Chain names in table ip vpcnet.
const (
	chainMangle     = "mangle-prerouting"
	chainNATPre     = "nat-prerouting"
	chainSNATMark   = "snat-mark"
	chainNATPost    = "nat-postrouting"
	chainPodIMDS    = "pod-imds"
	natPrePriority  = -90 // after kube-proxy's DNAT (-100): sees the real destination
	natPostPriority = 100 // srcnat
	// podIMDSPriority is raw's: the drop comes before conntrack and any
	// DNAT, whatever the destination is rewritten to afterwards.
	podIMDSPriority = -300
)

// The instance metadata service's addresses (IPv4, and IPv6 on Nitro).
var (
	imdsV4 = netip.MustParseAddr("169.254.169.254")
	imdsV6 = netip.MustParseAddr("fd00:ec2::254")
)

// chainSpec is one chain as we want it, with its rules in order.
type chainSpec struct {
	name     string
	hook     *nftables.ChainHook // nil for a regular chain
	priority nftables.ChainPriority
	typ      nftables.ChainType
	rules    []ruleSpec
}

type ruleSpec struct {
	comment string // without ownerComment
	exprs   []expr.Any
}

// hostRules is the input of the host's nftables rules.
type hostRules struct {
	primaryIf    string
	primaryIP    netip.Addr
	vpcCIDRs     []netip.Prefix
	excluded     []netip.Prefix
	externalSNAT bool
	vethPrefix   string
	mark         uint32
	snatPorts    SNATPorts
	// denyPodIMDS drops packets from pods to IMDS (VPCNET_POD_IMDS=deny).
	denyPodIMDS bool
}

// desiredChains returns table ip vpcnet's content, the nftables form of
// aws-node's iptables rules:
//
//	mangle PREROUTING -i eth0 -m addrtype --dst-type LOCAL --limit-iface-in -j CONNMARK --set-mark M/M
//	mangle PREROUTING -i eni+ -j CONNMARK --restore-mark --mask M
//	nat PREROUTING -i eni+ -j AWS-CONNMARK-CHAIN-0 (VPC/excluded CIDRs return, else set ct mark M)
//	nat PREROUTING -j CONNMARK --restore-mark --mask M
//	nat POSTROUTING -j AWS-SNAT-CHAIN-0 (VPC/excluded CIDRs return, else SNAT --random-fully)
//
// Unlike aws-node, SNAT applies only to connections the snat-mark chain
// marked (pod traffic leaving the VPC), never to the node's own traffic. With
// external SNAT only the mangle chain remains: NodePort replies must still
// leave by the primary interface.
func desiredChains(r hostRules) []chainSpec {
	pods := iifname(r.vethPrefix, true)
	mangle := chainSpec{
		name: chainMangle, hook: nftables.ChainHookPrerouting,
		priority: *nftables.ChainPriorityMangle, typ: nftables.ChainTypeFilter,
		rules: []ruleSpec{{
			comment: fmt.Sprintf("mark connections to the node entering on %s", r.primaryIf),
			exprs:   concat(iifname(r.primaryIf, false), daddrLocal(true), setCtMarkBits(r.mark)),
		}},
	}
	mangle.rules = append(mangle.rules, restoreMark(pods, r.mark, "replies from pods")...)
	if r.externalSNAT {
		return append([]chainSpec{mangle}, podIMDSChains(r, imdsV4)...)
	}

	natPre := chainSpec{
		name: chainNATPre, hook: nftables.ChainHookPrerouting,
		priority: natPrePriority, typ: nftables.ChainTypeNAT,
		rules: []ruleSpec{
			{comment: "node-local destinations are not SNAT-marked", exprs: concat(daddrLocal(false), verdictReturn())},
			{comment: "pod connections may need SNAT", exprs: concat(pods, jump(chainSNATMark))},
		},
	}
	natPre.rules = append(natPre.rules, restoreMark(nil, r.mark, "first packet of SNAT connections")...)

	snatMark := chainSpec{name: chainSNATMark}
	post := chainSpec{
		name: chainNATPost, hook: nftables.ChainHookPostrouting,
		priority: natPostPriority, typ: nftables.ChainTypeNAT,
	}
	for _, p := range r.vpcCIDRs {
		snatMark.rules = append(snatMark.rules, ruleSpec{"VPC CIDR " + p.String() + " needs no SNAT", concat(daddrIn(p), verdictReturn())})
		post.rules = append(post.rules, ruleSpec{"VPC CIDR " + p.String() + " is not SNATed", concat(daddrIn(p), verdictReturn())})
	}
	for _, p := range r.excluded {
		snatMark.rules = append(snatMark.rules, ruleSpec{"excluded CIDR " + p.String() + " needs no SNAT", concat(daddrIn(p), verdictReturn())})
		post.rules = append(post.rules, ruleSpec{"excluded CIDR " + p.String() + " is not SNATed", concat(daddrIn(p), verdictReturn())})
	}
	snatMark.rules = append(snatMark.rules, ruleSpec{
		comment: "pod connection leaving the VPC: SNAT it and route it via the primary interface",
		exprs:   setCtMarkBits(r.mark),
	})
	post.rules = append(post.rules, ruleSpec{
		comment: "SNAT pod traffic leaving the VPC to " + r.primaryIP.String(),
		exprs:   concat(ctMarkHas(r.mark, true), snatTo(r.primaryIP, r.snatPorts)),
	})
	return append([]chainSpec{mangle, natPre, snatMark, post}, podIMDSChains(r, imdsV4)...)
}

// podIMDSChains is the chain that drops pods' packets to IMDS at addr, in
// the table of addr's family, when VPCNET_POD_IMDS=deny: a pod must not
// take the node's IAM role. It hooks prerouting, so it sees only packets
// that entered the node, on a pod's veth; hostNetwork pods send from the
// node itself and are not affected. The IPv6 chain is the whole of table
// ip6 vpcnet, which exists only then.
func podIMDSChains(r hostRules, addr netip.Addr) []chainSpec {
	if !r.denyPodIMDS {
		return nil
	}
	var match []expr.Any
	if addr.Is6() {
		match = daddr6Is(addr)
	} else {
		match = daddrIn(netip.PrefixFrom(addr, 32))
	}
	return []chainSpec{{
		name: chainPodIMDS, hook: nftables.ChainHookPrerouting,
		priority: podIMDSPriority, typ: nftables.ChainTypeFilter,
		rules: []ruleSpec{{
			comment: "VPCNET_POD_IMDS=deny: drop pod packets to IMDS at " + addr.String(),
			exprs:   concat(iifname(r.vethPrefix, true), match, drop()),
		}},
	}}
}

// restoreMark copies the connection's mark bits into the packet mark
// (CONNMARK --restore-mark --mask M), one clear and one set rule per bit so
// bits owned by others are kept. match narrows which packets it applies to.
func restoreMark(match []expr.Any, mark uint32, what string) []ruleSpec {
	var out []ruleSpec
	for _, bit := range bitsOf(mark) {
		out = append(out,
			ruleSpec{
				comment: fmt.Sprintf("restore mark %#x: clear on %s", bit, what),
				exprs:   concat(match, ctMarkHas(bit, false), setMetaMarkBit(bit, false)),
			},
			ruleSpec{
				comment: fmt.Sprintf("restore mark %#x: set on %s", bit, what),
				exprs:   concat(match, ctMarkHas(bit, true), setMetaMarkBit(bit, true)),
			})
	}
	return out
}
