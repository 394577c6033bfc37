package dataplane

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// reconcileTable makes table vpcnet of family fam hold exactly want;
// an empty want removes it. When it already does, nothing is written
// (handles and counters survive); otherwise the table is deleted and
// rebuilt in one transaction, so packets never see a half-written rule
// set. Only our own table is ever touched.
func reconcileTable(n *nftConn, fam nftables.TableFamily, want []chainSpec) (changed bool, err error) {
	return reconcileNamedTable(n, fam, TableName, want)
}

// reconcileNamedTable is reconcileTable for another of vpcnet's tables.
func reconcileNamedTable(n *nftConn, fam nftables.TableFamily, name string, want []chainSpec) (changed bool, err error) {
	if len(want) == 0 {
		return deleteNamedTable(n, fam, name)
	}
	t, err := n.table(fam, name)
	if err != nil {
		return false, err
	}
	if t != nil {
		same, err := tableMatches(n, t, want)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
		n.delTable(t)
	}
	t = n.addTable(&nftables.Table{Family: fam, Name: name})
	chains := make([]*nftables.Chain, len(want))
	// Chains first: a jump may only name a chain that exists.
	for i, c := range want {
		chains[i] = n.addChain(toChain(t, c))
	}
	for i, c := range want {
		for _, r := range c.rules {
			n.addRule(&nftables.Rule{
				Table: t, Chain: chains[i], Exprs: r.exprs,
				UserData: userdata.AppendString(nil, userdata.TypeComment, ownerComment+r.comment),
			})
		}
	}
	if err := n.commit(); err != nil {
		return false, fmt.Errorf("write nftables table %s %s: %w", familyName(fam), name, err)
	}
	return true, nil
}

// deleteTable removes table vpcnet of family fam if it exists.
func deleteTable(n *nftConn, fam nftables.TableFamily) (deleted bool, err error) {
	return deleteNamedTable(n, fam, TableName)
}

func deleteNamedTable(n *nftConn, fam nftables.TableFamily, name string) (deleted bool, err error) {
	t, err := n.table(fam, name)
	if err != nil || t == nil {
		return false, err
	}
	n.delTable(t)
	if err := n.commit(); err != nil {
		return false, fmt.Errorf("delete nftables table %s %s: %w", familyName(fam), name, err)
	}
	return true, nil
}

// familyName is the family as nft writes it.
func familyName(fam nftables.TableFamily) string {
	if fam == nftables.TableFamilyIPv6 {
		return "ip6"
	}
	return "ip"
}

func toChain(t *nftables.Table, c chainSpec) *nftables.Chain {
	ch := &nftables.Chain{Name: c.name, Table: t}
	if c.hook != nil {
		prio := c.priority
		policy := nftables.ChainPolicyAccept
		ch.Hooknum, ch.Priority, ch.Type, ch.Policy = c.hook, &prio, c.typ, &policy
	}
	return ch
}

// tableMatches compares the kernel's table with want: the same chains with
// the same hooks, and in each the same rules in order, compared by comment
// and by the netlink encoding of their expressions.
func tableMatches(n *nftConn, t *nftables.Table, want []chainSpec) (bool, error) {
	have, err := n.chains(t)
	if err != nil {
		return false, err
	}
	if len(have) != len(want) {
		return false, nil
	}
	byName := make(map[string]*nftables.Chain, len(have))
	for _, c := range have {
		byName[c.Name] = c
	}
	for _, w := range want {
		c, ok := byName[w.name]
		if !ok || !sameHook(c, w) {
			return false, nil
		}
		rules, err := n.rules(t, c)
		if err != nil {
			return false, err
		}
		if len(rules) != len(w.rules) {
			return false, nil
		}
		for i, r := range rules {
			if !sameRule(r, w.rules[i]) {
				return false, nil
			}
		}
	}
	return true, nil
}

func sameHook(c *nftables.Chain, w chainSpec) bool {
	if w.hook == nil {
		return c.Hooknum == nil
	}
	return c.Hooknum != nil && *c.Hooknum == *w.hook &&
		c.Priority != nil && *c.Priority == w.priority &&
		c.Type == w.typ &&
		c.Policy != nil && *c.Policy == nftables.ChainPolicyAccept
}

func sameRule(r *nftables.Rule, w ruleSpec) bool {
	comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
	if comment != ownerComment+w.comment || len(r.Exprs) != len(w.exprs) {
		return false
	}
	for i := range r.Exprs {
		a, errA := canonical(r.Exprs[i])
		b, errB := canonical(w.exprs[i])
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			return false
		}
	}
	return true
}

// canonical encodes e after one decode round trip. The library's decoders
// drop some attributes (a ct statement's source register, for one), so an
// expression read back from the kernel only compares equal to what we
// wrote once both have been through the same decoder.
func canonical(e expr.Any) ([]byte, error) {
	const fam = byte(nftables.TableFamilyIPv4)
	data, err := expr.MarshalExprData(fam, e)
	if err != nil {
		return nil, err
	}
	fresh, ok := reflect.New(reflect.TypeOf(e).Elem()).Interface().(expr.Any)
	if !ok {
		return nil, fmt.Errorf("expression type %T cannot be copied", e)
	}
	if err := expr.Unmarshal(fam, data, fresh); err != nil {
		return nil, err
	}
	return expr.Marshal(fam, fresh)
}
