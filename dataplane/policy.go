package dataplane

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"go4.org/netipx"
	"golang.org/x/sys/unix"

	"github.com/vpcnet/vpcnet/netpol"
)

// PolicyTable is the nftables table (family ip) of the pods'
// NetworkPolicy verdicts, apart from the others so that each is rewritten
// alone.
const PolicyTable = "vpcnet-policy"

// The table's shape:
//
//	map ingress, egress: pod address : jump to the pod's chain
//	set peers-N:         the prefixes one Allow admits (shared by content)
//	counter drop-in-A, drop-out-A: the packets dropped for pod A
//	chain forward (hook forward), chain input (hook input):
//	    ct direction reply accept     (replies of allowed connections)
//	    ct state related accept       (their ICMP errors)
//	    ip saddr vmap @egress         (forward and input: a pod's egress,
//	                                   to other pods, the world or its node)
//	    ip daddr vmap @ingress        (forward only)
//	chain in-A / out-A: one rule per allowed peers and port, "return";
//	    then count and drop.
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
// digest of what it last wrote, and the drops counted by tables it has
// since replaced.
type policyState struct {
	digest [32]byte
	totals map[string]uint64 // by counter name
}

// SetPolicy makes the node's NetworkPolicy rules exactly rs, in one
// transaction; an empty rs removes the table. logDrops logs the first
// packet of each dropped connection through the kernel log, rate-limited.
func (d *Dataplane) SetPolicy(ctx context.Context, rs netpol.Ruleset, logDrops bool) error {
	digest, err := policyDigest(rs, logDrops)
	if err != nil {
		return err
	}
	// One write or read of the table at a time, so drop totals carried
	// over a rewrite are counted once. Only this namespace's nf_tables is
	// called under the lock, never the disk or the network.
	d.policyMu.Lock()
	defer d.policyMu.Unlock()
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	nft, err := s.nftables()
	if err != nil {
		return err
	}
	t, err := nft.table(nftables.TableFamilyIPv4, PolicyTable)
	if err != nil {
		return err
	}
	if t != nil && digest == d.policy.digest {
		return nil
	}
	if t != nil {
		// The counters go with the table: keep what they hold.
		counts, err := policyCounters(nft, t)
		if err != nil {
			return err
		}
		if d.policy.totals == nil {
			d.policy.totals = map[string]uint64{}
		}
		for name, n := range counts {
			d.policy.totals[name] += n
		}
		nft.delTable(t)
	}
	if len(rs.Pods) > 0 {
		writePolicyTable(nft, rs, logDrops)
	}
	if err := nft.commit(); err != nil {
		return fmt.Errorf("write nftables table ip %s: %w", PolicyTable, err)
	}
	d.policy.digest = digest
	// Totals of pods no longer isolated are forgotten.
	keep := map[string]bool{}
	for _, r := range rs.Pods {
		keep[dropCounter(r.Pod.IP, true)], keep[dropCounter(r.Pod.IP, false)] = true, true
	}
	for name := range d.policy.totals {
		if !keep[name] {
			delete(d.policy.totals, name)
		}
	}
	return nil
}

// PolicyDrops counts the packets dropped per isolated pod since it was
// first isolated (by this process).
func (d *Dataplane) PolicyDrops(ctx context.Context) (map[netip.Addr]netpol.Drops, error) {
	d.policyMu.Lock()
	defer d.policyMu.Unlock()
	s, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	nft, err := s.nftables()
	if err != nil {
		return nil, err
	}
	t, err := nft.table(nftables.TableFamilyIPv4, PolicyTable)
	if err != nil || t == nil {
		return map[netip.Addr]netpol.Drops{}, err
	}
	counts, err := policyCounters(nft, t)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]netpol.Drops{}
	for name, n := range counts {
		n += d.policy.totals[name]
		dir, addr, ok := parseDropCounter(name)
		if !ok {
			continue
		}
		v := out[addr]
		if dir == "in" {
			v.Ingress = n
		} else {
			v.Egress = n
		}
		out[addr] = v
	}
	return out, nil
}

func policyDigest(rs netpol.Ruleset, logDrops bool) ([32]byte, error) {
	data, err := json.Marshal(struct {
		RS  netpol.Ruleset
		Log bool
	}{rs, logDrops})
	if err != nil {
		return [32]byte{}, fmt.Errorf("encode NetworkPolicy rules: %w", err)
	}
	return sha256.Sum256(data), nil
}

func policyCounters(n *nftConn, t *nftables.Table) (map[string]uint64, error) {
	objs, err := nftRead(func() ([]nftables.Obj, error) { return n.c.GetObjects(t) })
	if err != nil {
		return nil, fmt.Errorf("read counters of table %s: %w", t.Name, err)
	}
	out := map[string]uint64{}
	for _, o := range objs {
		if c, ok := o.(*nftables.CounterObj); ok {
			out[c.Name] = c.Packets
		}
	}
	return out, nil
}

func podChain(a netip.Addr, ingress bool) string {
	if ingress {
		return "in-" + a.String()
	}
	return "out-" + a.String()
}

func dropCounter(a netip.Addr, ingress bool) string { return "drop-" + podChain(a, ingress) }

func parseDropCounter(name string) (dir string, a netip.Addr, ok bool) {
	rest, ok := strings.CutPrefix(name, "drop-")
	if !ok {
		return "", netip.Addr{}, false
	}
	dir, ip, ok := strings.Cut(rest, "-")
	if !ok {
		return "", netip.Addr{}, false
	}
	a, err := netip.ParseAddr(ip)
	return dir, a, err == nil
}

// writePolicyTable queues the whole table; the caller commits.
func writePolicyTable(n *nftConn, rs netpol.Ruleset, logDrops bool) {
	t := n.addTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: PolicyTable})
	c := n.c
	// Peer sets, one per distinct list of prefixes.
	peerSets := map[string]*nftables.Set{}
	peerSet := func(ps []netip.Prefix) *nftables.Set {
		var b netipx.IPSetBuilder
		for _, p := range ps {
			b.AddPrefix(p)
		}
		ipset, _ := b.IPSet()
		ranges := ipset.Ranges()
		key := fmt.Sprint(ranges)
		if s, ok := peerSets[key]; ok {
			return s
		}
		s := &nftables.Set{Table: t, Name: fmt.Sprintf("peers-%d", len(peerSets)), KeyType: nftables.TypeIPAddr, Interval: true}
		var elems []nftables.SetElement
		for _, r := range ranges {
			from := r.From().As4()
			elems = append(elems, nftables.SetElement{Key: from[:]})
			if end := r.To().Next(); end.IsValid() {
				e := end.As4()
				elems = append(elems, nftables.SetElement{Key: e[:], IntervalEnd: true})
			}
		}
		// Queued, like every other write, until the commit.
		_ = c.AddSet(s, elems)
		peerSets[key] = s
		return s
	}
	vmaps := map[bool]*nftables.Set{}
	vmapElems := map[bool][]nftables.SetElement{}
	var chains []chainSpec
	for _, r := range rs.Pods {
		for _, ingress := range []bool{true, false} {
			iso := r.Egress
			if ingress {
				iso = r.Ingress
			}
			if iso == nil {
				continue
			}
			name := podChain(r.Pod.IP, ingress)
			counter := dropCounter(r.Pod.IP, ingress)
			c.AddObj(&nftables.CounterObj{Table: t, Name: counter})
			ch := chainSpec{name: name}
			dir := "egress"
			if ingress {
				dir = "ingress"
			}
			for _, a := range iso.Allows {
				if !a.AnyPeer && len(a.Peers) == 0 {
					continue // allows nothing
				}
				var peer []expr.Any
				if !a.AnyPeer {
					s := peerSet(a.Peers)
					peer = lookupAddr(!ingress, s)
				}
				if a.Ports == nil {
					ch.rules = append(ch.rules, ruleSpec{comment: a.Rule, exprs: concat(peer, verdictReturn())})
					continue
				}
				for _, p := range a.Ports {
					ch.rules = append(ch.rules, ruleSpec{comment: a.Rule, exprs: concat(peer, policyPort(p), verdictReturn())})
				}
			}
			who := fmt.Sprintf("%s %s/%s", dir, r.Pod.Namespace, r.Pod.Name)
			if logDrops {
				ch.rules = append(ch.rules, ruleSpec{comment: "log dropped connections, " + who,
					exprs: concat(ctStateHas(expr.CtStateBitNEW),
						[]expr.Any{&expr.Limit{Type: expr.LimitTypePkts, Rate: policyLogRate, Unit: expr.LimitTimeSecond, Burst: policyLogRate},
							&expr.Log{Key: 1 << unix.NFTA_LOG_PREFIX, Data: []byte(logPrefix("vpcnet-policy drop " + who + ": "))}})})
			}
			ch.rules = append(ch.rules, ruleSpec{comment: "what no policy allows, " + who,
				exprs: []expr.Any{&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counter}, &expr.Verdict{Kind: expr.VerdictDrop}}})
			chains = append(chains, ch)
			ip := r.Pod.IP.As4()
			vmapElems[ingress] = append(vmapElems[ingress], nftables.SetElement{Key: ip[:],
				VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: name}})
		}
	}
	for _, ingress := range []bool{true, false} {
		name := policyMapEgress
		if ingress {
			name = policyMapIngress
		}
		s := &nftables.Set{Table: t, Name: name, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
		vmaps[ingress] = s
	}
	base := func(name string, hook *nftables.ChainHook, ingressToo bool) chainSpec {
		ch := chainSpec{name: name, hook: hook, priority: *nftables.ChainPriorityFilter, typ: nftables.ChainTypeFilter}
		ch.rules = []ruleSpec{
			{comment: "replies of allowed connections", exprs: concat(ctDirectionReply(), accept())},
			{comment: "ICMP errors of allowed connections", exprs: concat(ctStateHas(expr.CtStateBitRELATED), accept())},
			{comment: "a pod's egress", exprs: concat(saddrLoad(), vmapLookup(vmaps[false]))},
		}
		if ingressToo {
			ch.rules = append(ch.rules, ruleSpec{comment: "a pod's ingress", exprs: concat(daddrLoad(), vmapLookup(vmaps[true]))})
		}
		return ch
	}
	all := append(chains, base("forward", nftables.ChainHookForward, true), base("input", nftables.ChainHookInput, false))
	added := make([]*nftables.Chain, len(all))
	for i, ch := range all {
		added[i] = n.addChain(toChain(t, ch))
	}
	// The maps after the chains their jumps name, before the rules
	// that look them up.
	for _, ingress := range []bool{true, false} {
		_ = c.AddSet(vmaps[ingress], vmapElems[ingress])
	}
	for i, ch := range all {
		for _, r := range ch.rules {
			n.addRule(&nftables.Rule{Table: t, Chain: added[i], Exprs: r.exprs,
				UserData: userdata.AppendString(nil, userdata.TypeComment, ownerComment+r.comment)})
		}
	}
}

// logPrefix fits a log prefix in the kernel's 127 bytes.
func logPrefix(s string) string {
	if len(s) > 127 {
		s = s[:124] + ": "
	}
	return s
}

func saddrLoad() []expr.Any {
	return []expr.Any{&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}}
}

func daddrLoad() []expr.Any {
	return []expr.Any{&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}}
}

// lookupAddr matches the peer address in s: the destination for egress,
// the source for ingress.
func lookupAddr(dst bool, s *nftables.Set) []expr.Any {
	load := saddrLoad()
	if dst {
		load = daddrLoad()
	}
	return append(load, &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
}

func vmapLookup(s *nftables.Set) []expr.Any {
	return []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, DestRegister: 0, IsDestRegSet: true}}
}

// policyPort matches a protocol and, unless every port, a destination
// port or range.
func policyPort(p netpol.Port) []expr.Any {
	var proto byte
	switch p.Protocol {
	case netpol.TCP:
		proto = unix.IPPROTO_TCP
	case netpol.UDP:
		proto = unix.IPPROTO_UDP
	case netpol.SCTP:
		proto = unix.IPPROTO_SCTP
	}
	out := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
	if p.AllPorts() {
		return out
	}
	out = append(out, &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
	if p.First == p.Last {
		return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(p.First)})
	}
	return append(out, &expr.Range{Op: expr.CmpOpEq, Register: 1,
		FromData: binaryutil.BigEndian.PutUint16(p.First), ToData: binaryutil.BigEndian.PutUint16(p.Last)})
}

// ipCTDirReply is the kernel's IP_CT_DIR_REPLY.
const ipCTDirReply = 1

// ctDirectionReply matches packets of a connection's reply direction.
func ctDirectionReply() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeyDIRECTION},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ipCTDirReply}},
	}
}

func ctStateHas(bit uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bit), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

func accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }
