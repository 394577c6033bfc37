package dataplane

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/vpcnet/vpcnet/verdicts"
)

// NetworkPolicy of an IPv6 node's pods' IPv4 egress (ENABLE_V4_EGRESS):
// each pod reaches IPv4 destinations through a second veth from a
// node-local 169.254.172.0/22 address, SNATed to the node's address
// (egress4.go), which table ip6 vpcnet-policy never sees. Table ip
// vpcnet-policy of an IPv6 node judges that traffic by the pod's egress
// verdicts, before the SNAT (hook forward, and hook input for the node's
// own IPv4 addresses):
//
//	map egress-v4: host veth name : jump to the pod's chain
//	set peers-<hash>, counter drop-out-P, chain out-P: as in table ip6,
//	    with the IPv4 prefixes of the pod's egress Allows
//	chain forward, chain input:
//	    ct direction reply accept     (replies of allowed connections)
//	    ct state related accept       (their ICMP errors)
//	    iifname vmap @egress-v4
//
// The map is keyed by the host veth's name, not the pod's IPv4 address:
// the name follows from the attachment (EgressV4VethName), so the agent
// writes the entry during vpcnet's part of the ADD, before the egress
// plugin has made the veth or host-local has chosen the address, and the
// pod's first IPv4 packet meets its verdicts. A veth no entry names (a
// pod not egress-isolated) is open, as in table ip6.
//
// Peers: only ipBlock prefixes of IPv4 can match here. Pod and namespace
// selectors name pods, and an IPv6 node's pods have IPv6 addresses only
// (their 169.254.172.x address is node-local and SNATed away), so a
// selector peer allows no IPv4 destination; the compiler's prefixes of
// the other family are left out of the sets, as table ip6 leaves out
// IPv4 ones. An Allow with no peers (any peer) allows every IPv4
// destination on its ports.
//
// Every original-direction packet is judged, so a changed policy cuts an
// established IPv4 connection it no longer allows and keeps one it still
// allows. The table holds a chain for every egress-isolated pod of the
// node, as table ip6 does, also one bound to the node and not yet added:
// an ADD then adds its map entry alone. Any other change rewrites the
// table whole, in place and in one transaction (its counters kept); it
// holds one chain per egress-isolated pod, so a rewrite stays small.
const policyMapEgressV4 = "egress-v4"

// egressV4PolicyState is what a Dataplane last wrote to, or found in,
// table ip vpcnet-policy of an IPv6 node.
type egressV4PolicyState struct {
	known  bool // false: nothing known, the table is read and compared
	absent bool // the table was removed or never needed
	// rules names the chains, sets and base chains last written, use
	// the table's use count then, and entries the map's, veth : chain.
	rules   [32]byte
	use     uint32
	entries map[string]string
}

// egressV4Policy is the table rendered: no chains when no pod is
// egress-isolated.
type egressV4Policy struct {
	logDrops bool
	// chains are the pods' chains by name, sets the peer sets their
	// rules look up.
	chains map[string]egressV4Chain
	sets   map[string]peerRanges
	// rules names what the table holds but the map's entries (chains,
	// their rules, sets, logDrops); entries are the map's, veth : chain.
	rules   [32]byte
	entries map[string]string
}

// egressV4Chain is one egress-isolated pod's chain, and the Isolation
// and logDrops it was rendered from: a later write handed the same
// Isolation (the compiler hands a pod's verdicts again while nothing
// they depend on changed) takes it as it is, so an ADD renders its own
// pod's chain, not every pod's.
type egressV4Chain struct {
	from     *verdicts.Isolation
	logDrops bool
	digest   [32]byte
	rules    []ruleSpec
	sets     map[string]peerRanges
}

// egressV4Renders keeps the chains last rendered, by name; guarded by
// policyMu.
type egressV4Renders struct {
	chains map[string]egressV4Chain
}

// policy renders the IPv4 egress part of rs: a chain for every
// egress-isolated pod, a map entry for each with an egress veth.
func (r *egressV4Renders) policy(rs verdicts.Ruleset, logDrops bool) egressV4Policy {
	type podEntry struct {
		pod verdicts.PodRef
		iso *verdicts.Isolation
	}
	pods := map[string]podEntry{}
	entries := map[string]string{}
	for _, pr := range rs.Pods {
		if pr.Egress == nil {
			continue
		}
		name := podChainName(pr.Pod, false)
		if _, ok := pods[name]; !ok {
			// Another sandbox of the same pod shares the chain of its
			// first entry, as in the pod address maps.
			pods[name] = podEntry{pod: pr.Pod, iso: pr.Egress}
		}
		if pr.EgressV4Veth != "" {
			entries[pr.EgressV4Veth] = name
		}
	}
	out := egressV4Policy{logDrops: logDrops, chains: make(map[string]egressV4Chain, len(pods)), sets: map[string]peerRanges{}, entries: entries}
	h := sha256.New()
	fmt.Fprintf(h, "logDrops=%t\n", logDrops)
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		e := pods[name]
		c, ok := r.chains[name]
		if !ok || c.from != e.iso || c.logDrops != logDrops {
			c = renderEgressV4Chain(name, e.pod, e.iso, logDrops)
		}
		out.chains[name] = c
		maps.Copy(out.sets, c.sets)
		// The name with its length, so no two lists hash alike.
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(name))))
		io.WriteString(h, name)
		h.Write(c.digest[:])
	}
	r.chains = out.chains
	copy(out.rules[:], h.Sum(nil))
	return out
}

// renderEgressV4Chain renders one pod's chain: its Allows' IPv4
// prefixes, an Allow of IPv6 peers only allowing nothing here.
func renderEgressV4Chain(name string, pod verdicts.PodRef, iso *verdicts.Isolation, logDrops bool) egressV4Chain {
	c := egressV4Chain{from: iso, logDrops: logDrops, sets: map[string]peerRanges{}}
	sig := newChainSig(pod, logDrops)
	var allows []setAllow
	for i := range iso.Allows {
		a := &iso.Allows[i]
		if !a.AnyPeer && len(a.Peers) == 0 {
			continue // allows nothing
		}
		set := "*"
		if !a.AnyPeer {
			r := renderPeers(policyIPv4, a.Peers)
			if r.name == "" {
				continue // IPv6 peers (pods, IPv6 blocks) only: no IPv4 destination
			}
			set = r.name
			c.sets[set] = r.ranges
		}
		sig.allow(a, set)
		allows = append(allows, setAllow{a, set})
	}
	c.digest = sig.sum()
	c.rules = chainRules(policyIPv4, pod, false, logDrops, dropCounter(name), allows)
	return c
}

// use is the table's use count when it holds p: a chain and a counter
// per pod chain, the peer sets, two base chains and the map.
func (p egressV4Policy) use() uint32 { return uint32(2*len(p.chains) + len(p.sets) + 3) }

// spec is the whole table p describes.
func (p egressV4Policy) spec() tableSpec {
	var spec tableSpec
	for _, name := range slices.Sorted(maps.Keys(p.chains)) {
		spec.chains = append(spec.chains, chainSpec{name: name, rules: p.chains[name].rules})
		spec.counters = append(spec.counters, dropCounter(name))
	}
	spec.chains = append(spec.chains, egressV4BaseChain("forward", nftables.ChainHookForward),
		egressV4BaseChain("input", nftables.ChainHookInput))
	for _, name := range slices.Sorted(maps.Keys(p.sets)) {
		spec.sets = append(spec.sets, setSpec{name: name, key: nftables.TypeIPAddr, interval: true, elems: setElements(policyIPv4, p.sets[name])})
	}
	var elems []nftables.SetElement
	for _, veth := range slices.Sorted(maps.Keys(p.entries)) {
		elems = append(elems, egressV4Entry(veth, p.entries[veth]))
	}
	return tableSpec{chains: spec.chains, counters: spec.counters,
		sets: append(spec.sets, setSpec{name: policyMapEgressV4, key: nftables.TypeIFName, isMap: true, elems: elems})}
}

func egressV4Entry(veth, chain string) nftables.SetElement {
	return nftables.SetElement{Key: ifnameKey(veth), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

// ifnameKey is an interface name as the kernel's ifname type holds it,
// padded to IFNAMSIZ.
func ifnameKey(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// egressV4BaseChain is a hooked chain of the table: replies and their
// ICMP errors pass, then the input veth's verdict. The input hook judges
// the pod's IPv4 egress to the node's own addresses, as table ip6's
// input chain judges its IPv6 egress to them.
func egressV4BaseChain(name string, hook *nftables.ChainHook) chainSpec {
	return chainSpec{name: name, hook: hook, priority: *nftables.ChainPriorityFilter, typ: nftables.ChainTypeFilter,
		rules: []ruleSpec{
			{comment: "replies of allowed connections", exprs: concat(ctDirectionReply(), accept())},
			{comment: "ICMP errors of allowed connections", exprs: concat(ctStateHas(expr.CtStateBitRELATED), accept())},
			{comment: "a pod's IPv4 egress, by its egress veth", exprs: concat(
				[]expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}}, vmapLookup(policyMapEgressV4))},
		}}
}

// writeEgressV4Policy makes table ip vpcnet-policy of an IPv6 node next
// (no chains: no table), under policyMu. written says whether a
// transaction was committed. What is written, by what is known:
//   - the same rules as last written, other map entries (an ADD of a pod
//     whose chain was written when it was bound, a DEL): those entries,
//     without listing the tables first; when the kernel refuses them (the
//     table, map or chain gone, an entry to delete not there), the table
//     is read and repaired as after a restart;
//   - the same rules and entries, and the table still has as many
//     chains, sets and counters: nothing;
//   - nothing known (the agent restarted): the table is read whole and
//     compared; when it holds next nothing is written;
//   - otherwise the whole table, in place, in one transaction, so that
//     the pods' verdicts never lapse.
func (d *Dataplane) writeEgressV4Policy(nft *nftConn, next egressV4Policy) (written bool, err error) {
	last := d.policyV4
	empty := len(next.chains) == 0
	if empty && last.known && last.absent {
		return false, nil
	}
	d.policyV4 = egressV4PolicyState{} // until this write is known to have landed
	done := egressV4PolicyState{known: true, rules: next.rules, use: next.use(), entries: next.entries}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: PolicyTable}
	if !empty && last.known && !last.absent && last.rules == next.rules && !maps.Equal(last.entries, next.entries) {
		if err := changeEgressV4Entries(nft, table, last.entries, next.entries); err != nil {
			return false, err
		}
		err := nft.commit()
		if err == nil {
			d.policyV4 = done
			return true, nil
		}
		d.log.Warn("IPv4 egress policy map entries refused; reading the table", "err", err)
		last = egressV4PolicyState{} // compare the table whole
	}
	t, err := nft.table(nftables.TableFamilyIPv4, PolicyTable)
	if err != nil {
		return false, err
	}
	if empty {
		if t != nil {
			nft.delTable(t)
			if err := nft.commit(); err != nil {
				return false, fmt.Errorf("delete nftables table ip %s of IPv4 egress: %w", PolicyTable, err)
			}
			written = true
		}
		d.policyV4 = egressV4PolicyState{known: true, absent: true}
		return written, nil
	}
	if t != nil && last.known && !last.absent && last.rules == next.rules && maps.Equal(last.entries, next.entries) && tableUse(t) == last.use {
		d.policyV4 = done
		return false, nil
	}
	if written, err = writeWholeTable(nft, nftables.TableFamilyIPv4, "ip "+PolicyTable+" of IPv4 egress", t, next.spec(), !last.known); err != nil {
		return false, err
	}
	if written {
		d.policyV4Rewrites.Add(1)
	}
	d.policyV4 = done
	return written, nil
}

// changeEgressV4Entries queues what turns the map's entries from last
// into next: those that go or change first, then the new ones.
func changeEgressV4Entries(n *nftConn, t *nftables.Table, last, next map[string]string) error {
	m := toSet(t, setSpec{name: policyMapEgressV4, key: nftables.TypeIFName, isMap: true})
	var gone, added []nftables.SetElement
	for veth, chain := range last {
		if next[veth] != chain {
			gone = append(gone, egressV4Entry(veth, chain))
		}
	}
	for veth, chain := range next {
		if last[veth] != chain {
			added = append(added, egressV4Entry(veth, chain))
		}
	}
	if len(gone) > 0 {
		if err := n.setDeleteElements(m, gone); err != nil {
			return err
		}
	}
	if len(added) > 0 {
		return n.setAddElements(m, added)
	}
	return nil
}
