package dataplane

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// EgressV4Table is the nftables table (family ip) of IPv6 pods' IPv4
// egress: one chain at srcnat with one rule,
//
//	ip saddr @pods ip daddr != 224.0.0.0/4 snat ip to NODE fully-random
//
// and the set pods of the addresses of pods wired for it, each element
// commented with its attachment. aws-node writes, per pod, a nat chain
// E4-<hash> (`-d 224.0.0.0/4 -j ACCEPT`, then `-j SNAT --to-source NODE
// --random-fully`) and a POSTROUTING jump to it from the pod's address;
// one set keeps the cost of a packet the same with 250 pods as with one.
// It is a table of its own, apart from TableName, because the plugin
// writes it on every ADD while the agent rewrites table vpcnet whole.
const EgressV4Table = "vpcnet-egress-v4"

const (
	egressChain = "nat-postrouting"
	egressSet   = "pods"
)

var multicastV4 = netip.MustParsePrefix("224.0.0.0/4")

func egressTable() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyIPv4, Name: EgressV4Table}
}

// egressRule is the one rule of the chain. Multicast is left alone as
// aws-node leaves it: a group address is not something to NAT to.
func egressRule(snat EgressSNAT) ruleSpec {
	m := prefixMask(multicastV4.Bits())
	group := multicastV4.Addr().As4()
	return ruleSpec{
		comment: "IPv4 egress of IPv6 pods, SNAT to the node's address",
		exprs: concat(lookupAddr(false, egressSet), daddrLoad(), []expr.Any{
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: m[:], Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: group[:]},
		}, snatTo(snat.NodeIP, snat.Ports)),
	}
}

// addEgressSNAT puts addr in the set under owner, in one transaction that
// also creates the table, chain and set if missing and rewrites the chain
// to its one rule. Concurrent ADDs each commit the same end state (the
// kernel serialises transactions), so no ADD needs a lock, and a changed
// node address or port mode takes effect at the next ADD. An element of
// addr left by an attachment whose DEL never came is replaced, so the
// comment names the attachment that holds the address now.
func addEgressSNAT(n *nftConn, snat EgressSNAT, addr netip.Addr, owner string) error {
	have, err := n.table(nftables.TableFamilyIPv4, EgressV4Table)
	if err != nil {
		return err
	}
	var stale []nftables.SetElement
	if have != nil {
		_, elems, err := egressElements(n, have)
		if err != nil {
			return err
		}
		for _, e := range elems {
			if keyAddr(e) == addr && e.Comment != owner {
				stale = append(stale, nftables.SetElement{Key: e.Key})
			}
		}
	}
	t := n.addTable(egressTable())
	policy := nftables.ChainPolicyAccept
	ch := n.addChain(&nftables.Chain{
		Name: egressChain, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &policy,
	})
	set := &nftables.Set{Table: t, Name: egressSet, KeyType: nftables.TypeIPAddr}
	if err := n.addSet(set, nil); err != nil {
		return err
	}
	n.flushChain(ch)
	r := egressRule(snat)
	n.addRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r.exprs,
		UserData: userdata.AppendString(nil, userdata.TypeComment, ownerComment+r.comment)})
	if len(stale) > 0 {
		if err := n.setDeleteElements(set, stale); err != nil {
			return err
		}
	}
	key := addr.As4()
	if err := n.setAddElements(set, []nftables.SetElement{{Key: key[:], Comment: owner}}); err != nil {
		return err
	}
	if err := n.commit(); err != nil {
		return fmt.Errorf("write nftables table ip %s (SNAT of %s to %s): %w", EgressV4Table, addr, snat.NodeIP, err)
	}
	return nil
}

// delEgressSNAT removes from the set the elements of addrs and those
// commented with owner (when owner is not empty) and returns their
// addresses. A missing table or set means nothing to remove.
func delEgressSNAT(n *nftConn, addrs []netip.Addr, owner string) ([]netip.Addr, error) {
	t, err := n.table(nftables.TableFamilyIPv4, EgressV4Table)
	if err != nil || t == nil {
		return nil, err
	}
	set, elems, err := egressElements(n, t)
	if err != nil || set == nil {
		return nil, err
	}
	var gone []nftables.SetElement
	var removed []netip.Addr
	for _, e := range elems {
		a := keyAddr(e)
		if slices.Contains(addrs, a) || (owner != "" && e.Comment == owner) {
			gone = append(gone, nftables.SetElement{Key: e.Key})
			removed = append(removed, a)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	if err := n.setDeleteElements(set, gone); err != nil {
		return nil, err
	}
	if err := n.commit(); err != nil {
		return nil, fmt.Errorf("remove %v from nftables set ip %s %s: %w", removed, EgressV4Table, egressSet, err)
	}
	return removed, nil
}

// egressElements returns the set and its elements, or a nil set when the
// table has none.
func egressElements(n *nftConn, t *nftables.Table) (*nftables.Set, []nftables.SetElement, error) {
	sets, err := n.sets(t)
	if err != nil {
		return nil, nil, err
	}
	i := slices.IndexFunc(sets, func(s *nftables.Set) bool { return s.Name == egressSet })
	if i < 0 {
		return nil, nil, nil
	}
	elems, err := n.setElements(sets[i])
	if err != nil {
		return nil, nil, err
	}
	return sets[i], elems, nil
}

func keyAddr(e nftables.SetElement) netip.Addr {
	a, _ := netip.AddrFromSlice(e.Key)
	return a
}

// checkEgressSNAT reports what keeps addr from being SNATed as snat says.
func checkEgressSNAT(n *nftConn, snat EgressSNAT, addr netip.Addr) ([]error, error) {
	t, err := n.table(nftables.TableFamilyIPv4, EgressV4Table)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return []error{fmt.Errorf("nftables table ip %s does not exist", EgressV4Table)}, nil
	}
	var problems []error
	chains, err := n.chains(t)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(chains, func(c *nftables.Chain) bool { return c.Name == egressChain })
	if i < 0 {
		problems = append(problems, fmt.Errorf("nftables chain ip %s %s does not exist", EgressV4Table, egressChain))
	} else {
		rules, err := n.rules(t, chains[i])
		if err != nil {
			return nil, err
		}
		if len(rules) != 1 || !sameRule(rules[0], egressRule(snat)) {
			problems = append(problems, fmt.Errorf("nftables chain ip %s %s does not hold exactly the rule SNATing to %s (%s)",
				EgressV4Table, egressChain, snat.NodeIP, portsOrDefault(snat.Ports)))
		}
	}
	_, elems, err := egressElements(n, t)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(elems, func(e nftables.SetElement) bool { return keyAddr(e) == addr }) {
		problems = append(problems, fmt.Errorf("nftables set ip %s %s lacks %s", EgressV4Table, egressSet, addr))
	}
	return problems, nil
}

func portsOrDefault(p SNATPorts) SNATPorts {
	if p == "" {
		return SNATPortsFullyRandom
	}
	return p
}
