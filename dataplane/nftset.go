package dataplane

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// Tables with named sets, verdict maps and counters, beside chains: the
// policy table. reconcileNamedTable's tables have chains only and are
// rebuilt whole when they differ; these are rewritten in place, still in
// one transaction, so that their named counters keep counting across a
// rewrite (and across restarts of the agent).

// tableSpec is a whole table as data.
type tableSpec struct {
	chains   []chainSpec
	sets     []setSpec
	counters []string // named counters
}

// setSpec is a named set of addresses, or a verdict map from addresses,
// of key's type (ipv4_addr when none).
type setSpec struct {
	name     string
	key      nftables.SetDatatype
	isMap    bool
	interval bool
	elems    []nftables.SetElement
}

// tableState is what the kernel holds of one table.
type tableState struct {
	chains []*nftables.Chain
	rules  map[string][]*nftables.Rule // by chain name
	sets   []*nftables.Set
	elems  map[string][]nftables.SetElement // by set name
	objs   []nftables.Obj
}

// readTableState reads t: with contents, its rules and set elements too,
// which matches needs; without, only the names queueTableSpec replaces.
func readTableState(n *nftConn, t *nftables.Table, contents bool) (tableState, error) {
	st := tableState{rules: map[string][]*nftables.Rule{}, elems: map[string][]nftables.SetElement{}}
	var err error
	if st.chains, err = n.chains(t); err != nil {
		return st, err
	}
	if st.sets, err = n.sets(t); err != nil {
		return st, err
	}
	if st.objs, err = n.objects(t); err != nil {
		return st, err
	}
	if !contents {
		return st, nil
	}
	for _, c := range st.chains {
		if st.rules[c.Name], err = n.rules(t, c); err != nil {
			return st, err
		}
	}
	for _, s := range st.sets {
		if st.elems[s.Name], err = n.setElements(s); err != nil {
			return st, err
		}
	}
	return st, nil
}

// use is what the kernel reports as the table's use count when it holds
// want: one for each chain, set and object.
func (want tableSpec) use() uint32 {
	return uint32(len(want.chains) + len(want.sets) + len(want.counters))
}

// tableUse is t's use count. The library (v0.3.0) decodes the kernel's
// big-endian number in the host's byte order.
func tableUse(t *nftables.Table) uint32 {
	return binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, t.Use))
}

// matches says the kernel's table is want: the same chains and rules
// (as tableMatches compares them), the same sets with the same
// elements, and the same counters and no other object.
func (st tableState) matches(want tableSpec) bool {
	if len(st.chains) != len(want.chains) || len(st.sets) != len(want.sets) || len(st.objs) != len(want.counters) {
		return false
	}
	chains := make(map[string]*nftables.Chain, len(st.chains))
	for _, c := range st.chains {
		chains[c.Name] = c
	}
	for _, w := range want.chains {
		c, ok := chains[w.name]
		if !ok || !sameHook(c, w) || len(st.rules[w.name]) != len(w.rules) {
			return false
		}
		for i, r := range st.rules[w.name] {
			if !sameRule(r, w.rules[i]) {
				return false
			}
		}
	}
	sets := make(map[string]*nftables.Set, len(st.sets))
	for _, s := range st.sets {
		sets[s.Name] = s
	}
	for _, w := range want.sets {
		s, ok := sets[w.name]
		if !ok || !sameSet(s, w) || !sameElements(st.elems[w.name], w) {
			return false
		}
	}
	counters := make(map[string]bool, len(st.objs))
	for _, o := range st.objs {
		if c, ok := o.(*nftables.CounterObj); ok {
			counters[c.Name] = true
		}
	}
	for _, name := range want.counters {
		if !counters[name] {
			return false
		}
	}
	return true
}

// sameSet compares a set's kind. The library (v0.3.0) reads a verdict
// map's data type into its key type, so a map's key is not compared; its
// elements' keys are.
func sameSet(s *nftables.Set, w setSpec) bool {
	if s.IsMap != w.isMap || s.Interval != w.interval || s.Anonymous || s.HasTimeout || s.Dynamic || s.Concatenation {
		return false
	}
	return w.isMap || s.KeyType.Name == w.keyType().Name
}

func (w setSpec) keyType() nftables.SetDatatype {
	if w.key.Name == "" {
		return nftables.TypeIPAddr
	}
	return w.key
}

func sameElements(have []nftables.SetElement, w setSpec) bool {
	if len(have) != len(w.elems) {
		return false
	}
	a := make([]string, len(have))
	for i, e := range have {
		a[i] = elementKey(e, w.isMap)
	}
	b := make([]string, len(w.elems))
	for i, e := range w.elems {
		b[i] = elementKey(e, w.isMap)
	}
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// elementKey is an element as text: its key, whether it ends an
// interval, and for a verdict map its verdict. Elements read back carry
// the verdict as the kernel's nested attributes in Val; those written
// carry it in VerdictData.
func elementKey(e nftables.SetElement, isMap bool) string {
	k := hex.EncodeToString(e.Key)
	if e.IntervalEnd {
		k += " end"
	}
	if !isMap {
		return k
	}
	v := e.VerdictData
	if v == nil {
		v = decodeVerdict(e.Val)
	}
	if v == nil {
		return k + " : ?"
	}
	return fmt.Sprintf("%s : %d %s", k, v.Kind, v.Chain)
}

// decodeVerdict reads NFTA_VERDICT_CODE and NFTA_VERDICT_CHAIN from the
// attributes of a verdict, or returns nil.
func decodeVerdict(b []byte) *expr.Verdict {
	var v expr.Verdict
	seen := false
	for len(b) >= unix.NLA_HDRLEN {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < unix.NLA_HDRLEN || l > len(b) {
			return nil
		}
		data := b[unix.NLA_HDRLEN:l]
		switch typ {
		case unix.NFTA_VERDICT_CODE:
			if len(data) != 4 {
				return nil
			}
			v.Kind = expr.VerdictKind(int32(binary.BigEndian.Uint32(data)))
			seen = true
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = string(trimNUL(data))
		}
		next := (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	if !seen {
		return nil
	}
	return &v
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// queueTableSpec queues what makes the table want. A table that exists
// (t, with have read from it) is emptied in place rather than deleted:
// its rules, sets and maps go and come back, chains whose hook is
// unchanged stay (emptied), and counters that want keeps are left alone
// so they go on counting. The caller commits, so all of it is one
// transaction.
func queueTableSpec(n *nftConn, fam nftables.TableFamily, name string, t *nftables.Table, have *tableState, want tableSpec) error {
	keptChains := map[string]bool{}
	keptCounters := map[string]bool{}
	if t == nil {
		t = n.addTable(&nftables.Table{Family: fam, Name: name})
	} else {
		wantChains := make(map[string]chainSpec, len(want.chains))
		for _, c := range want.chains {
			wantChains[c.name] = c
		}
		wantCounters := make(map[string]bool, len(want.counters))
		for _, c := range want.counters {
			wantCounters[c] = true
		}
		// Rules first, so nothing refers to a set, map or chain when
		// it goes; maps before chains, as their elements jump to them.
		n.flushTable(t)
		for _, s := range have.sets {
			n.delSet(s)
		}
		for _, c := range have.chains {
			if w, ok := wantChains[c.Name]; ok && sameHook(c, w) {
				keptChains[c.Name] = true
				continue
			}
			n.delChain(c)
		}
		for _, o := range have.objs {
			if c, ok := o.(*nftables.CounterObj); ok && wantCounters[c.Name] {
				keptCounters[c.Name] = true
				continue
			}
			n.delObj(o)
		}
	}
	for _, c := range want.counters {
		if !keptCounters[c] {
			n.addObj(&nftables.CounterObj{Table: t, Name: c})
		}
	}
	// Sets before the rules that look them up; maps after the chains
	// their jumps name.
	for _, s := range want.sets {
		if !s.isMap {
			if err := n.addSet(toSet(t, s), s.elems); err != nil {
				return err
			}
		}
	}
	chains := make([]*nftables.Chain, len(want.chains))
	for i, c := range want.chains {
		if keptChains[c.name] {
			chains[i] = &nftables.Chain{Name: c.name, Table: t}
			continue
		}
		chains[i] = n.addChain(toChain(t, c))
	}
	for _, s := range want.sets {
		if s.isMap {
			if err := n.addSet(toSet(t, s), s.elems); err != nil {
				return err
			}
		}
	}
	for i, c := range want.chains {
		for _, r := range c.rules {
			n.addRule(&nftables.Rule{
				Table: t, Chain: chains[i], Exprs: r.exprs,
				UserData: userdata.AppendString(nil, userdata.TypeComment, ownerComment+r.comment),
			})
		}
	}
	return nil
}

func toSet(t *nftables.Table, s setSpec) *nftables.Set {
	set := &nftables.Set{Table: t, Name: s.name, KeyType: s.keyType(), Interval: s.interval}
	if set.KeyType.Name == nftables.TypeIFName.Name {
		// As nft marks a string key: without it nft reads the name
		// backwards and lists every key as "" (the kernel matches the
		// bytes either way).
		set.KeyByteOrder = binaryutil.NativeEndian
	}
	if s.isMap {
		set.IsMap, set.DataType = true, nftables.TypeVerdict
	}
	return set
}
