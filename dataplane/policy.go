package dataplane

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"go4.org/netipx"
	"golang.org/x/sys/unix"

	"github.com/vpcnet/vpcnet/hostport"
	"github.com/vpcnet/vpcnet/verdicts"
)

// PolicyTable is the nftables table of the pods' NetworkPolicy
// verdicts, apart from the others so that each is rewritten alone:
// family ip on an IPv4 node, ip6 on an IPv6 node (Options.IPv6Policy,
// policyfamily.go), of the same shape; an IPv6 node whose pods have IPv4
// egress (Options.EgressV4Policy) has a table ip of that name too,
// judging their IPv4 egress alone (policyv4egress.go).
const PolicyTable = "vpcnet-policy"

// The table's shape:
//
//	map ingress, egress: pod address : jump to the pod's chain
//	set peers-<hash>:    the prefixes one Allow admits, named by content
//	                     so that the pods one policy selects share it
//	counter drop-in-P, drop-out-P: the packets dropped for pod P, kept
//	                     by every rewrite while P stays isolated
//	chain forward (hook forward), chain input (hook input):
//	    ct direction reply accept     (replies of allowed connections)
//	    ct state related accept       (their ICMP errors)
//	    icmpv6 type 133-137 accept    (table ip6: neighbour discovery)
//	    ip saddr vmap @egress         (forward and input: a pod's egress,
//	                                   to other pods, the world or its node)
//	    ip daddr vmap @ingress        (forward only)
//	chain in-P / out-P: one rule per allowed peers and port, "return";
//	    then, with logDrops, a rate-limited log of new connections;
//	    then count and drop.
//
// A pod's chains are named by the pod (namespace/name), not its address,
// and are written as soon as the API server has bound the pod to the
// node, before it has an address: its Add then adds two map entries
// rather than chains, rules and counters, and the Del removes them. The
// chains go when the pod leaves the node.
//
// An allow returns rather than accepts, so a packet between two isolated
// pods of the node passes the source's egress and then the destination's
// ingress. Every original-direction packet is judged, not only a
// connection's first, so a changed policy cuts what it no longer allows
// and keeps what it still allows without touching conntrack. Traffic
// from the node to its pods (hook output: kubelet probes) is never
// judged, as upstream implementations allow node-local traffic. When the
// agent is down the table stays as last written: pods keep the verdicts
// they had.
const (
	policyMapIngress = "ingress"
	policyMapEgress  = "egress"
	// policyLogRate bounds the kernel log lines of dropped connections.
	policyLogRate = 10
)

// policyState is what the Dataplane remembers of its policy table: the
// model of what it last wrote or found, and the table's use count then
// (its chains, sets and counters).
type policyState struct {
	last *policyModel
	use  uint32
}

// policyModel is the table's content, by name: what a change is
// computed against, so that a new pod (an ADD) writes its own chain and
// map entry rather than the whole table.
type policyModel struct {
	fam      *policyFamily
	logDrops bool
	chains   map[string]podChain
	sets     map[string]peerRanges
}

// podChain is one isolated pod's chain in one direction, with the
// addresses whose map entries jump to it: none before the pod's Add,
// more than one while a sandbox the runtime replaced awaits its Del.
type podChain struct {
	addrs   []netip.Addr
	ingress bool
	counter string
	rules   []ruleSpec
	digest  [32]byte
	// from is the Isolation the chain was rendered from, and logDrops
	// the setting: a later model handed the same Isolation (the
	// compiler hands a pod's verdicts again while nothing they depend
	// on changed) takes digest and rules without hashing them again.
	// Holding the pointer keeps its memory from being reused for
	// another.
	from     *verdicts.Isolation
	logDrops bool
}

// SetPolicy makes the node's NetworkPolicy rules exactly rs, in one
// transaction; an empty rs removes the table, and when the table already
// holds rs nothing is written. logDrops logs the first packet of each
// dropped connection through the kernel log, rate-limited.
//
// What is written, by what is known:
//   - rs is what this Dataplane last wrote or found, and the table still
//     has as many chains, sets and counters: nothing, for the price of
//     listing the tables. An edit by someone else inside our table that
//     keeps those counts goes unseen until the rules change; a deleted or
//     added chain, set or counter, or the table gone, is seen and
//     repaired.
//   - rs differs from what this Dataplane last wrote in its pods'
//     addresses only (an ADD or a DEL of a pod whose chains were
//     written when it was bound to the node): those map entries, without
//     listing the table first. When the kernel refuses them (a chain or
//     map they need is gone, an entry to delete is not there), the table
//     is read and rewritten as after a restart.
//   - this Dataplane wrote the table before: the change (the pods'
//     chains, map entries and sets that differ), so that an ADD writes
//     one pod's chain rather than the table.
//   - nothing is known (the agent restarted): the table is read whole and
//     compared with rs; when it holds rs nothing is written.
//   - otherwise, or when a change is refused: the whole table, in place.
//
// Counters of pods that stay isolated are kept in every case, so a pod's
// drops count from when it was first isolated in that direction, across
// rewrites and restarts of the agent.
//
// The Isolations of rs must not change once given: an Isolation handed
// again for the same pod (as netpol.Compiler hands a pod's verdicts while
// nothing they depend on changes) is taken to say what it said, and its
// chain is not rendered or hashed again.
func (d *Dataplane) SetPolicy(ctx context.Context, rs verdicts.Ruleset, logDrops bool) error {
	var next *policyModel
	if len(rs.Pods) > 0 {
		var err error
		if next, err = d.peerRenders.model(rs, logDrops); err != nil {
			return err
		}
	}
	// Held across the kernel calls: the model of the last write must be
	// what the kernel holds when the next change is computed against it,
	// and a write queues deletions of what it read. Only this
	// namespace's nf_tables is called under it, never the disk or the
	// network; PolicyDrops does not take it.
	d.policyMu.Lock()
	defer d.policyMu.Unlock()
	nft, err := d.policyNFT(ctx)
	if err != nil {
		return err
	}
	written, err := d.writePolicy(nft, next)
	if d.peerRenders.family() == policyIPv6 {
		// The pods' IPv4 egress through their egress veths, judged by
		// the same verdicts in table ip (policyv4egress.go); written
		// also when the ip6 write failed, so neither waits on the other.
		// Without IPv4 egress the table is removed if there.
		var v4 egressV4Policy
		if d.egressV4Policy {
			v4 = d.egressV4Renders.policy(rs, logDrops)
		}
		w4, err4 := d.writeEgressV4Policy(nft, v4)
		written = written || w4
		err = errors.Join(err, err4)
	}
	if err != nil {
		// The kept connection may hold what the failed write queued, or
		// a broken socket: the next call starts from a fresh one.
		d.dropPolicyNFT()
	}
	if written {
		d.policyWrites.Add(1)
	}
	return err
}

// writePolicy is SetPolicy's work, under policyMu: it makes the table
// next (nil: no table). written says whether a transaction was
// committed.
func (d *Dataplane) writePolicy(nft *nftConn, next *policyModel) (written bool, err error) {
	f := d.peerRenders.family()
	fam := f.table
	last, lastUse := d.policy.last, d.policy.use
	if next != nil && last != nil && last.onlyAddressesDiffer(next) {
		// An ADD's or a DEL's write: map entries only, sent without
		// reading the table first. The kernel checks what they need: an
		// entry that jumps to a chain gone, into a map gone, or a
		// deleted entry that is not there, fails the transaction whole,
		// and the table is then read and repaired below. The table's use
		// count (its chains, sets and counters) does not change with map
		// entries; another change of it is seen by the next write that
		// reads it.
		d.policy = policyState{}
		if err := changePolicyTable(nft, &nftables.Table{Name: PolicyTable, Family: fam}, last, next); err != nil {
			return false, err
		}
		err := nft.commit()
		if err == nil {
			d.policy = policyState{last: next, use: lastUse}
			return true, nil
		}
		d.log.Warn("NetworkPolicy map entries refused; reading the table", "err", err)
		last = nil // the table is not what was last written: compare it whole
	}
	d.policyReads.Add(1)
	t, err := nft.table(fam, PolicyTable)
	if err != nil {
		return false, err
	}
	if next == nil {
		d.policy = policyState{}
		if t == nil {
			return false, nil
		}
		nft.delTable(t)
		if err := nft.commit(); err != nil {
			return false, fmt.Errorf("delete nftables table %s %s: %w", f.name, PolicyTable, err)
		}
		return true, nil
	}
	consistent := t != nil && last != nil && tableUse(t) == lastUse
	if consistent && last.same(next) {
		return false, nil
	}
	d.policy = policyState{} // until this write is known to have landed
	done := policyState{last: next, use: next.use()}
	if consistent && last.logDrops == next.logDrops {
		// An error in queueing is a bug in what we built, which a whole
		// rewrite would repeat; and what was queued must not be sent.
		if err := changePolicyTable(nft, t, last, next); err != nil {
			return false, err
		}
		err := nft.commit()
		if err == nil {
			d.policy = done
			return true, nil
		}
		d.log.Warn("NetworkPolicy table change refused; rewriting it whole", "err", err)
	}
	// The whole table, its sets' elements made now.
	if written, err = writeWholeTable(nft, fam, f.name+" "+PolicyTable, t, next.spec(), last == nil); err != nil {
		return false, err
	}
	d.policy = done
	return written, nil
}

// writeWholeTable makes table t of family fam (nil: not there yet) hold
// spec, in place and in one transaction, so no verdict lapses. compare
// says nothing is known of t (the agent restarted, or a write was
// refused): it is read and compared first, and when it already holds
// spec nothing is written. what names the table in errors.
func writeWholeTable(nft *nftConn, fam nftables.TableFamily, what string, t *nftables.Table, spec tableSpec, compare bool) (written bool, err error) {
	var have *tableState
	if t != nil {
		st, err := readTableState(nft, t, compare)
		if err != nil {
			return false, err
		}
		if compare && st.matches(spec) {
			return false, nil
		}
		have = &st
	}
	if err := queueTableSpec(nft, fam, PolicyTable, t, have, spec); err != nil {
		return false, err
	}
	if err := nft.commit(); err != nil {
		return false, fmt.Errorf("write nftables table %s: %w", what, err)
	}
	return true, nil
}

// PolicyDrops counts the packets dropped per isolated pod, per
// direction, since the pod was first isolated in that direction. A pod
// that leaves the rules loses its count. On an IPv6 node a pod's egress
// drops include those of its IPv4 egress.
func (d *Dataplane) PolicyDrops(ctx context.Context) (map[netip.Addr]verdicts.Drops, error) {
	// Its own connection, not the writers' kept one: a scrape does not
	// wait for a write, nor a write for a scrape.
	s, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	nft, err := s.nftables()
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]verdicts.Drops{}
	f := d.peerRenders.family()
	t, err := nft.table(f.table, PolicyTable)
	if err != nil || t == nil {
		return out, err
	}
	// A counter is named by its pod's chain; the verdict maps say which
	// addresses jump to the chain.
	addrs := map[string][]netip.Addr{}
	ingress, egress := policyMaps(f, t)
	for _, m := range []*nftables.Set{ingress, egress} {
		elems, err := nft.setElements(m)
		if err != nil {
			return nil, fmt.Errorf("read nftables map %s %s %s: %w", f.name, PolicyTable, m.Name, err)
		}
		for _, e := range elems {
			a, ok := netip.AddrFromSlice(e.Key)
			if v := decodeVerdict(e.Val); ok && v != nil && v.Kind == expr.VerdictJump {
				addrs[v.Chain] = append(addrs[v.Chain], a.Unmap())
			}
		}
	}
	objs, err := nft.objects(t)
	if err != nil {
		return nil, err
	}
	if f == policyIPv6 {
		// The IPv4 egress drops of the same pods (table ip of an IPv6
		// node), counted with their IPv6 egress drops: the counters
		// bear the same chain names.
		v4, err := nft.table(nftables.TableFamilyIPv4, PolicyTable)
		if err != nil {
			return nil, err
		}
		if v4 != nil {
			more, err := nft.objects(v4)
			if err != nil {
				return nil, err
			}
			objs = append(objs, more...)
		}
	}
	for _, o := range objs {
		c, ok := o.(*nftables.CounterObj)
		if !ok {
			continue
		}
		chain, in, ok := chainOfCounter(c.Name)
		if !ok {
			continue
		}
		for _, addr := range addrs[chain] {
			v := out[addr]
			if in {
				v.Ingress += c.Packets
			} else {
				v.Egress += c.Packets
			}
			out[addr] = v
		}
	}
	return out, nil
}

// policyNFT is the policy table's nf_tables connection, opened on first
// use and kept: opening the node's namespace and two netlink sockets was
// a good part of the time an ADD waits for its pod's rules. Callers hold
// policyMu.
func (d *Dataplane) policyNFT(ctx context.Context) (*nftConn, error) {
	if d.policyConn != nil {
		return d.policyConn, nil
	}
	s, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	// The socket is bound to the namespace when made; the session's
	// handles are not needed after.
	defer s.close()
	c, err := newNFT(s.ns)
	if err != nil {
		return nil, err
	}
	d.policyConn = c
	return c, nil
}

// dropPolicyNFT closes the kept connection after a failure, so the
// next call starts from a fresh one. Callers hold policyMu.
func (d *Dataplane) dropPolicyNFT() {
	if d.policyConn != nil {
		d.policyConn.close()
		d.policyConn = nil
	}
}

// podChainMax bounds a pod chain's name so that its counter's name,
// "drop-" and the chain's, fits the kernel's 255 bytes
// (NFT_NAME_MAXLEN).
const podChainMax = 240

// podChainName is "in-namespace/name" or "out-namespace/name", which the
// nft command reads unquoted (namespaces and pod names are lower-case
// letters, digits, '-' and '.'). A name too long for the kernel keeps
// its start and ends with a hash of the whole.
func podChainName(pod verdicts.PodRef, ingress bool) string {
	dir := "out-"
	if ingress {
		dir = "in-"
	}
	name := dir + pod.Namespace + "/" + pod.Name
	if len(name) <= podChainMax {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := fmt.Sprintf("-h%x", sum[:8])
	return name[:podChainMax-len(suffix)] + suffix
}

func dropCounter(chain string) string { return "drop-" + chain }

// chainOfCounter is the chain whose drops counter name is, and whether
// it is an ingress chain.
func chainOfCounter(name string) (chain string, ingress, ok bool) {
	chain, ok = strings.CutPrefix(name, "drop-")
	switch {
	case !ok:
		return "", false, false
	case strings.HasPrefix(chain, "in-"):
		return chain, true, true
	case strings.HasPrefix(chain, "out-"):
		return chain, false, true
	}
	return "", false, false
}

// renderPeers is one peer set's address ranges, of f's family, and its
// content's name.
func renderPeers(f *policyFamily, ps []netip.Prefix) renderedSet {
	mine := f.only(ps)
	if len(mine) == 0 {
		return renderedSet{}
	}
	rs := addrRanges(mine)
	ranges := make(peerRanges, 0, 2*f.addrLen*len(rs))
	h := sha256.New()
	// The hash of each range is its first address and the address after
	// its last (zeros after the family's last address).
	var end []byte
	for _, r := range rs {
		ranges = f.append(ranges, r.From())
		ranges = f.append(ranges, r.To())
		end = end[:0]
		if next := r.To().Next(); next.IsValid() {
			end = f.append(end, next)
		} else {
			end = append(end, make([]byte, f.addrLen)...)
		}
		h.Write(ranges[len(ranges)-2*f.addrLen : len(ranges)-f.addrLen])
		h.Write(end)
	}
	return renderedSet{name: fmt.Sprintf("peers-%x", h.Sum(nil)[:8]), ranges: ranges}
}

// peerRanges are inclusive ranges of addresses of one family, each its
// first and last address, one after the other: how a peer set is kept
// between writes, 8 bytes an IPv4 range (32 an IPv6 one) where its two
// set elements take some 300 (a 1,668-prefix set was half a megabyte of
// the agent's heap).
type peerRanges []byte

// setElements are an interval set's elements for ranges of f's family,
// made when the set is written: each range's first address, and the
// address after its last as the interval's end (none after the family's
// last address).
func setElements(f *policyFamily, ranges peerRanges) []nftables.SetElement {
	n := len(ranges) / (2 * f.addrLen)
	elems := make([]nftables.SetElement, 0, 2*n)
	keys := make([]byte, 0, 2*f.addrLen*n)
	key := func() []byte { return keys[len(keys)-f.addrLen : len(keys) : len(keys)] }
	for i := 0; i < len(ranges); i += 2 * f.addrLen {
		keys = append(keys, ranges[i:i+f.addrLen]...)
		elems = append(elems, nftables.SetElement{Key: key()})
		last, _ := netip.AddrFromSlice(ranges[i+f.addrLen : i+2*f.addrLen])
		if end := last.Next(); end.IsValid() {
			keys = f.append(keys, end)
			elems = append(elems, nftables.SetElement{Key: key(), IntervalEnd: true})
		}
	}
	return elems
}

// policyModelOf renders rs: each isolated pod's chain per direction, and
// the peer sets, named by their content so that pods admitting the same
// peers share one and an unchanged set keeps its name across writes.
// The table is of one family (the IPv4 one here): a pod must have an
// address of it, its own (two pods cannot both own one verdict map
// entry), and the other family's peers, which no packet here can come
// from, are left out.
func policyModelOf(rs verdicts.Ruleset, logDrops bool) (*policyModel, error) {
	return (&peerRenders{}).model(rs, logDrops)
}

// peerRenders remembers the peer sets rendered by the last model: the
// compiler hands every pod a rule selects the same Peers slice, and the
// same slice again on every write while the cluster is unchanged, so a
// set of thousands of peers is rendered once, not on every ADD. A slice
// is known by its first element's address and length; the compiler never
// changes a slice it handed out, and holding the pointer keeps its memory
// from being reused for another.
type peerRenders struct {
	mu   sync.Mutex
	last map[peerSliceID]renderedSet
	// chains are the last model's, whose rules a chain with the same
	// name and digest reuses.
	chains map[string]podChain
	// hashed counts the chains whose digest a model computed, for tests.
	hashed int
	// fam is the table's family; nil is IPv4. Set before the first
	// model, never changed after.
	fam *policyFamily
}

func (pr *peerRenders) family() *policyFamily {
	if pr.fam == nil {
		return policyIPv4
	}
	return pr.fam
}

type peerSliceID struct {
	first *netip.Prefix
	n     int
}

type renderedSet struct {
	name   string // "" when no peer of the table's family is left
	ranges peerRanges
}

func (pr *peerRenders) model(rs verdicts.Ruleset, logDrops bool) (*policyModel, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	f := pr.family()
	m := &policyModel{fam: f, logDrops: logDrops, chains: map[string]podChain{}, sets: map[string]peerRanges{}}
	used := map[peerSliceID]renderedSet{}
	defer func() { pr.last, pr.chains = used, m.chains }()
	peerSet := func(ps []netip.Prefix) string {
		id := peerSliceID{&ps[0], len(ps)}
		r, ok := used[id]
		if !ok {
			r, ok = pr.last[id]
		}
		if !ok {
			r = renderPeers(f, ps)
		}
		used[id] = r
		if r.name != "" {
			m.sets[r.name] = r.ranges
		}
		return r.name
	}
	seen := map[netip.Addr]bool{}
	var allows []setAllow
	for _, r := range rs.Pods {
		if r.Pod.IP.IsValid() {
			if !f.has(r.Pod.IP) {
				return nil, fmt.Errorf("pod %s/%s: address %v is not of the node's family (table %s %s)", r.Pod.Namespace, r.Pod.Name, r.Pod.IP, f.name, PolicyTable)
			}
			if seen[r.Pod.IP] {
				return nil, fmt.Errorf("pod %s/%s: address %s is another pod's too", r.Pod.Namespace, r.Pod.Name, r.Pod.IP)
			}
			seen[r.Pod.IP] = true
		}
		for _, ingress := range []bool{true, false} {
			iso := r.Egress
			if ingress {
				iso = r.Ingress
			}
			if iso == nil {
				continue
			}
			name := podChainName(r.Pod, ingress)
			if ch, ok := m.chains[name]; ok {
				// Another sandbox of the same pod (the runtime made a
				// new one before the old one's Del): one pod, one
				// chain, the verdicts of the pod's first entry.
				if r.Pod.IP.IsValid() {
					ch.addrs = append(slices.Clip(ch.addrs), r.Pod.IP)
					slices.SortFunc(ch.addrs, netip.Addr.Compare)
					m.chains[name] = ch
				}
				continue
			}
			ch := podChain{ingress: ingress, counter: dropCounter(name), from: iso, logDrops: logDrops}
			if r.Pod.IP.IsValid() {
				ch.addrs = []netip.Addr{r.Pod.IP}
			}
			if old, ok := pr.chains[name]; ok && old.from == iso && old.logDrops == logDrops {
				// The same verdicts as last time: the same rules, whose
				// peer sets this model still needs.
				for i := range iso.Allows {
					if a := &iso.Allows[i]; !a.AnyPeer && len(a.Peers) > 0 {
						peerSet(a.Peers)
					}
				}
				ch.digest, ch.rules = old.digest, old.rules
				m.chains[name] = ch
				continue
			}
			// What the rules say, hashed before they are rendered: a
			// chain the last model rendered from the same is reused,
			// so a write renders the chains that changed (an ADD's),
			// not every pod's.
			allows = allows[:0]
			pr.hashed++
			sig := newChainSig(r.Pod, logDrops)
			for i := range iso.Allows {
				a := &iso.Allows[i]
				if !a.AnyPeer && len(a.Peers) == 0 {
					continue // allows nothing
				}
				set := "*"
				if !a.AnyPeer {
					if set = peerSet(a.Peers); set == "" {
						continue // the other family's peers only: allows nothing here
					}
				}
				sig.allow(a, set)
				allows = append(allows, setAllow{a, set})
			}
			ch.digest = sig.sum()
			if old, ok := pr.chains[name]; ok && old.digest == ch.digest {
				ch.rules = old.rules
			} else {
				ch.rules = chainRules(f, r.Pod, ingress, logDrops, ch.counter, allows)
			}
			m.chains[name] = ch
		}
	}
	return m, nil
}

// setAllow is an Allow that allows something here, with its peer set's
// name ("*": any peer).
type setAllow struct {
	a   *verdicts.Allow
	set string
}

// chainRules renders one isolated pod's chain in one direction: a rule
// per allowed peers and port, returning; with logDrops, a rate-limited
// log of new connections; then count and drop.
func chainRules(f *policyFamily, pod verdicts.PodRef, ingress, logDrops bool, counter string, allows []setAllow) []ruleSpec {
	var rules []ruleSpec
	for _, sa := range allows {
		a := sa.a
		var peer []expr.Any
		if sa.set != "*" {
			peer = f.lookup(!ingress, sa.set)
		}
		comment := fitComment(a.Rule)
		if a.Ports == nil {
			rules = append(rules, ruleSpec{comment: comment, exprs: concat(peer, verdictReturn())})
			continue
		}
		for _, p := range a.Ports {
			rules = append(rules, ruleSpec{comment: comment, exprs: concat(peer, policyPort(p), verdictReturn())})
		}
	}
	dir := "egress"
	if ingress {
		dir = "ingress"
	}
	who := fmt.Sprintf("%s %s/%s", dir, pod.Namespace, pod.Name)
	if logDrops {
		rules = append(rules, ruleSpec{comment: fitComment("log dropped connections, " + who),
			exprs: concat(ctStateHas(expr.CtStateBitNEW),
				[]expr.Any{&expr.Limit{Type: expr.LimitTypePkts, Rate: policyLogRate, Unit: expr.LimitTimeSecond, Burst: policyLogRate},
					// The level is the kernel's default, written
					// because the kernel reports it: the rule then
					// reads back as written.
					&expr.Log{Key: 1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_LEVEL, Level: expr.LogLevelWarning,
						Data: []byte(logPrefix("vpcnet-policy drop " + who))}})})
	}
	return append(rules, ruleSpec{comment: fitComment("what no policy allows, " + who),
		exprs: []expr.Any{&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counter}, &expr.Verdict{Kind: expr.VerdictDrop}}})
}

// chainSig hashes what a pod's chain says: the pod, logDrops, and each
// Allow's rule, peer set and ports, field by field (fmt was most of the
// time a write spent on a node's unchanged pods).
type chainSig struct {
	h   hash.Hash
	buf []byte
}

func newChainSig(pod verdicts.PodRef, logDrops bool) *chainSig {
	s := &chainSig{h: sha256.New()}
	s.str(pod.Namespace)
	s.str(pod.Name)
	s.buf = strconv.AppendBool(s.buf[:0], logDrops)
	s.h.Write(s.buf)
	return s
}

// str writes v with its length, so no two sequences of fields hash alike.
func (s *chainSig) str(v string) {
	s.buf = binary.BigEndian.AppendUint32(s.buf[:0], uint32(len(v)))
	s.h.Write(s.buf)
	io.WriteString(s.h, v)
}

func (s *chainSig) allow(a *verdicts.Allow, set string) {
	s.str(a.Rule)
	s.str(set)
	if a.Ports == nil {
		s.str("every port")
		return
	}
	s.buf = binary.BigEndian.AppendUint32(s.buf[:0], uint32(len(a.Ports)))
	for _, p := range a.Ports {
		s.buf = append(s.buf, p.Protocol...)
		s.buf = append(s.buf, 0)
		s.buf = binary.BigEndian.AppendUint16(s.buf, p.First)
		s.buf = binary.BigEndian.AppendUint16(s.buf, p.Last)
	}
	s.h.Write(s.buf)
}

func (s *chainSig) sum() (d [32]byte) {
	copy(d[:], s.h.Sum(nil))
	return d
}

// addrRanges are the address ranges ps covers, merged: an interval set
// may not hold two ranges that touch. The compiler's prefixes come sorted
// and apart (netipx normalised them), which a pass checks and merges in
// linear time; anything else goes through netipx.
func addrRanges(ps []netip.Prefix) []netipx.IPRange {
	out := make([]netipx.IPRange, 0, len(ps))
	for _, p := range ps {
		r := netipx.RangeOfPrefix(p.Masked())
		if len(out) == 0 {
			out = append(out, r)
			continue
		}
		last := &out[len(out)-1]
		switch {
		case last.To().Less(r.From()) && last.To().Next() == r.From():
			*last = netipx.IPRangeFrom(last.From(), r.To())
		case last.To().Less(r.From()):
			out = append(out, r)
		default: // unsorted or overlapping
			var b netipx.IPSetBuilder
			for _, p := range ps {
				b.AddPrefix(p)
			}
			set, _ := b.IPSet()
			return set.Ranges()
		}
	}
	return out
}

// onlyAddressesDiffer says m and o have the same chains, rules and sets,
// and that some chain's addresses differ: going from one to the other
// adds and deletes map entries, nothing else.
func (m *policyModel) onlyAddressesDiffer(o *policyModel) bool {
	if m.logDrops != o.logDrops || len(m.chains) != len(o.chains) || len(m.sets) != len(o.sets) {
		return false
	}
	differ := false
	for name, ch := range m.chains {
		oc, ok := o.chains[name]
		if !ok || oc.digest != ch.digest {
			return false
		}
		differ = differ || !slices.Equal(oc.addrs, ch.addrs)
	}
	for name := range m.sets {
		if _, ok := o.sets[name]; !ok {
			return false
		}
	}
	return differ
}

// same says m and o write the same table.
func (m *policyModel) same(o *policyModel) bool {
	if m.logDrops != o.logDrops || len(m.chains) != len(o.chains) || len(m.sets) != len(o.sets) {
		return false
	}
	for name, ch := range m.chains {
		if oc, ok := o.chains[name]; !ok || oc.digest != ch.digest || !slices.Equal(oc.addrs, ch.addrs) {
			return false
		}
	}
	for name := range m.sets {
		if _, ok := o.sets[name]; !ok {
			return false
		}
	}
	return true
}

func policyMaps(f *policyFamily, t *nftables.Table) (ingress, egress *nftables.Set) {
	mk := func(name string) *nftables.Set {
		return &nftables.Set{Table: t, Name: name, IsMap: true, KeyType: f.keyType, DataType: nftables.TypeVerdict}
	}
	return mk(policyMapIngress), mk(policyMapEgress)
}

func peerSetObj(f *policyFamily, t *nftables.Table, name string) *nftables.Set {
	return &nftables.Set{Table: t, Name: name, KeyType: f.keyType, Interval: true}
}

func mapElem(f *policyFamily, addr netip.Addr, chain string) nftables.SetElement {
	return nftables.SetElement{Key: f.bytes(addr), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

// mapElems are the map entries of chain's addresses.
func mapElems(f *policyFamily, chain string, addrs []netip.Addr) []nftables.SetElement {
	out := make([]nftables.SetElement, len(addrs))
	for i, a := range addrs {
		out[i] = mapElem(f, a, chain)
	}
	return out
}

func (n *nftConn) addRules(t *nftables.Table, c *nftables.Chain, rules []ruleSpec) {
	for _, r := range rules {
		n.addRule(&nftables.Rule{Table: t, Chain: c, Exprs: r.exprs,
			UserData: userdata.AppendString(nil, userdata.TypeComment, ownerComment+r.comment)})
	}
}

// use is the table's use count when it holds m, spec().use() without
// making the table: a chain and a counter per pod chain, the peer sets,
// and the two base chains and two verdict maps.
func (m *policyModel) use() uint32 {
	return uint32(2*len(m.chains) + len(m.sets) + 4)
}

// spec is the whole table m describes: the pods' chains, counters and
// map entries, the peer sets, and the base chains.
func (m *policyModel) spec() tableSpec {
	var spec tableSpec
	var in, out []nftables.SetElement
	for _, name := range slices.Sorted(maps.Keys(m.chains)) {
		ch := m.chains[name]
		spec.chains = append(spec.chains, chainSpec{name: name, rules: ch.rules})
		spec.counters = append(spec.counters, ch.counter)
		if ch.ingress {
			in = append(in, mapElems(m.fam, name, ch.addrs)...)
		} else {
			out = append(out, mapElems(m.fam, name, ch.addrs)...)
		}
	}
	spec.chains = append(spec.chains, policyBaseChain(m.fam, "forward", nftables.ChainHookForward, true),
		policyBaseChain(m.fam, "input", nftables.ChainHookInput, false))
	for _, name := range slices.Sorted(maps.Keys(m.sets)) {
		spec.sets = append(spec.sets, setSpec{name: name, key: m.fam.keyType, interval: true, elems: setElements(m.fam, m.sets[name])})
	}
	spec.sets = append(spec.sets, setSpec{name: policyMapIngress, key: m.fam.keyType, isMap: true, elems: in},
		setSpec{name: policyMapEgress, key: m.fam.keyType, isMap: true, elems: out})
	return spec
}

// policyBaseChain is a hooked chain: replies of allowed connections (and
// their ICMP errors) pass before a verdict map is consulted. input judges
// egress only: a packet to the node's own addresses has no pod to admit
// it. Table ip6 passes neighbour discovery too, before the maps.
func policyBaseChain(f *policyFamily, name string, hook *nftables.ChainHook, ingressToo bool) chainSpec {
	ch := chainSpec{name: name, hook: hook, priority: *nftables.ChainPriorityFilter, typ: nftables.ChainTypeFilter}
	ch.rules = []ruleSpec{
		{comment: "replies of allowed connections", exprs: concat(ctDirectionReply(), accept())},
		{comment: "ICMP errors of allowed connections", exprs: concat(ctStateHas(expr.CtStateBitRELATED), accept())},
	}
	if f == policyIPv6 {
		ch.rules = append(ch.rules, ruleSpec{comment: "neighbour discovery", exprs: neighbourDiscovery()})
	}
	ch.rules = append(ch.rules, ruleSpec{comment: "a pod's egress", exprs: concat(f.addrLoad(false), vmapLookup(policyMapEgress))})
	if ingressToo {
		ch.rules = append(ch.rules, ruleSpec{comment: "a pod's ingress", exprs: concat(f.addrLoad(true), vmapLookup(policyMapIngress))})
	}
	return ch
}

// changePolicyTable queues what turns table t from last into next: new
// sets first (rules look them up); then the map entries that go (an
// address can move from one pod's chain to another's in one change, and
// a chain cannot go while an entry jumps to it); then per pod chain its
// removal, its rules replaced, or its addition with its counter; then
// the new map entries; then the sets nothing uses any more. Counters of
// pods that stay are kept.
func changePolicyTable(n *nftConn, t *nftables.Table, last, next *policyModel) error {
	var errs []error
	f := next.fam
	for name, ranges := range next.sets {
		if _, ok := last.sets[name]; !ok {
			errs = append(errs, n.addSet(peerSetObj(f, t, name), setElements(f, ranges)))
		}
	}
	ingress, egress := policyMaps(f, t)
	mapOf := func(ch podChain) *nftables.Set {
		if ch.ingress {
			return ingress
		}
		return egress
	}
	// entries outside keep: the addresses of ch that are not in keep.
	outside := func(ch podChain, keep []netip.Addr) []netip.Addr {
		var out []netip.Addr
		for _, a := range ch.addrs {
			if !slices.Contains(keep, a) {
				out = append(out, a)
			}
		}
		return out
	}
	for name, ch := range last.chains {
		if gone := outside(ch, next.chains[name].addrs); len(gone) > 0 {
			errs = append(errs, n.setDeleteElements(mapOf(ch), mapElems(f, name, gone)))
		}
	}
	for name, ch := range last.chains {
		if _, ok := next.chains[name]; ok {
			continue
		}
		chain := &nftables.Chain{Name: name, Table: t}
		n.flushChain(chain)
		n.delChain(chain)
		n.delObj(&nftables.CounterObj{Table: t, Name: ch.counter})
	}
	for name, ch := range next.chains {
		old, ok := last.chains[name]
		switch {
		case ok && old.digest == ch.digest:
		case ok:
			chain := &nftables.Chain{Name: name, Table: t}
			n.flushChain(chain)
			n.addRules(t, chain, ch.rules)
		default:
			n.addObj(&nftables.CounterObj{Table: t, Name: ch.counter})
			chain := n.addChain(&nftables.Chain{Name: name, Table: t})
			n.addRules(t, chain, ch.rules)
		}
	}
	for name, ch := range next.chains {
		if added := outside(ch, last.chains[name].addrs); len(added) > 0 {
			errs = append(errs, n.setAddElements(mapOf(ch), mapElems(f, name, added)))
		}
	}
	for name := range last.sets {
		if _, ok := next.sets[name]; !ok {
			n.delSet(peerSetObj(f, t, name))
		}
	}
	return errors.Join(errs...)
}

const (
	// logPrefixMax is the kernel's NF_LOG_PREFIXLEN less its NUL.
	logPrefixMax = 127
	// commentMax is what nft accepts as a rule comment, ours included.
	commentMax = 128
)

// logPrefix ends s with ": " and fits it in the kernel's log prefix,
// cutting the name rather than a character in two.
func logPrefix(s string) string {
	return truncateUTF8(s, logPrefixMax-2) + ": "
}

// fitComment fits a rule comment, ownerComment included, in what nft
// accepts. Namespace, pod and policy names make comments of up to some
// 600 bytes; the kernel refuses a rule whose comment passes its 256-byte
// limit (ERANGE), and with it the whole transaction: every pod of the
// node would keep its old verdicts because one policy has a long name.
func fitComment(s string) string {
	return truncateUTF8(s, commentMax-len(ownerComment))
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// daddrLoad loads the IPv4 destination; lookupAddr matches an IPv4
// address in the named set (the destination when dst): the SNAT of IPv4
// egress uses them too.
func daddrLoad() []expr.Any { return policyIPv4.addrLoad(true) }

func lookupAddr(dst bool, set string) []expr.Any { return policyIPv4.lookup(dst, set) }

// vmapLookup jumps to the chain the named verdict map holds for
// register 1.
func vmapLookup(vmap string) []expr.Any {
	return []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: vmap, DestRegister: 0, IsDestRegSet: true}}
}

// policyPort matches a protocol and, unless every port, a destination
// port or range.
func policyPort(p verdicts.Port) []expr.Any {
	// The hostPort rules' matches: netpol names protocols as the API
	// does (TCP), hostport as the runtime does (tcp).
	out := l4proto(hostport.Protocol(strings.ToLower(string(p.Protocol))))
	switch {
	case p.AllPorts():
		return out
	case p.First == p.Last:
		return append(out, dport(p.First)...)
	}
	return append(out,
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: binaryutil.BigEndian.PutUint16(p.First), ToData: binaryutil.BigEndian.PutUint16(p.Last)})
}
