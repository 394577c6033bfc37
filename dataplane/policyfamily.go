package dataplane

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// policyFamily is what the policy table's address family decides: the
// table's family, its maps' and sets' key type, and where the network
// header holds the addresses. A node's pods are of one family (aws-node
// gives an IPv6 node's pods IPv6 only), so a Dataplane writes one table,
// table ip vpcnet-policy or table ip6 vpcnet-policy, of the same shape;
// the compiler's Ruleset is the same for both.
//
// A parallel table rather than one table inet: an IPv4 node keeps the
// table ip it already has, byte for byte (its drop counters, peer set
// names and the ADD's map-entry-only writes unchanged across the
// upgrade), and an inet table would still need a map and a set per
// family, as a set's key has one type.
type policyFamily struct {
	table   nftables.TableFamily
	name    string // "ip", "ip6": as nft names the table's family
	keyType nftables.SetDatatype
	// addrLen is an address's length; saddr and daddr its offsets in the
	// network header.
	addrLen      int
	saddr, daddr uint32
}

var (
	policyIPv4 = &policyFamily{table: nftables.TableFamilyIPv4, name: "ip", keyType: nftables.TypeIPAddr, addrLen: 4, saddr: 12, daddr: 16}
	policyIPv6 = &policyFamily{table: nftables.TableFamilyIPv6, name: "ip6", keyType: nftables.TypeIP6Addr, addrLen: 16, saddr: 8, daddr: 24}
)

// has says a is of the family.
func (f *policyFamily) has(a netip.Addr) bool { return a.Is6() == (f.addrLen == 16) && !a.Is4In6() }

// bytes is a in the family's length.
func (f *policyFamily) bytes(a netip.Addr) []byte { return f.append(nil, a) }

// append appends a, in the family's length, to b.
func (f *policyFamily) append(b []byte, a netip.Addr) []byte {
	if f.addrLen == 4 {
		v := a.As4()
		return append(b, v[:]...)
	}
	v := a.As16()
	return append(b, v[:]...)
}

// only is ps without the other family's prefixes, ps itself when it has
// none.
func (f *policyFamily) only(ps []netip.Prefix) []netip.Prefix {
	for i, p := range ps {
		if !f.has(p.Addr()) {
			out := append([]netip.Prefix(nil), ps[:i]...)
			for _, p := range ps[i+1:] {
				if f.has(p.Addr()) {
					out = append(out, p)
				}
			}
			return out
		}
	}
	return ps
}

func (f *policyFamily) addrLoad(dst bool) []expr.Any {
	off := f.saddr
	if dst {
		off = f.daddr
	}
	return []expr.Any{&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(f.addrLen)}}
}

// lookup matches the peer address in the named set: the destination
// for egress, the source for ingress. The kernel finds the set by name,
// also one added earlier in the same transaction.
func (f *policyFamily) lookup(dst bool, set string) []expr.Any {
	return append(f.addrLoad(dst), &expr.Lookup{SourceRegister: 1, SetName: set})
}

// ndpFirst, ndpLast: router solicitation to redirect, the ICMPv6 types
// of neighbour discovery (RFC 4861).
const ndpFirst, ndpLast = 133, 137

// neighbourDiscovery accepts IPv6 neighbour discovery (`icmpv6 type
// 133-137 accept`). Conntrack leaves it untracked, so no reply rule
// passes it; without it an egress-isolated pod could not answer the
// node's neighbour solicitation for its address (the answer's source),
// and the node could no longer deliver to it. ARP, its IPv4 peer, is not
// IP and never meets a table ip.
func neighbourDiscovery() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{ndpFirst}, ToData: []byte{ndpLast}},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
}
