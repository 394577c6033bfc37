package dataplane

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// ipRule is a policy routing rule in the few shapes this package writes:
// a priority, optional source or destination prefix, optional fwmark/mask,
// and a table.
type ipRule struct {
	priority   int
	src, dst   netip.Prefix // invalid: any
	mark, mask uint32
	table      int
}

func (r ipRule) String() string {
	s := fmt.Sprintf("%d:", r.priority)
	if r.src.IsValid() {
		s += " from " + r.src.String()
	}
	if r.dst.IsValid() {
		s += " to " + r.dst.String()
	}
	if r.mask != 0 {
		s += fmt.Sprintf(" fwmark %#x/%#x", r.mark, r.mask)
	}
	if r.table == mainTable {
		return s + " lookup main"
	}
	return s + fmt.Sprintf(" lookup %d", r.table)
}

func (r ipRule) toNetlink() *netlink.Rule {
	nr := netlink.NewRule()
	nr.Family = netlink.FAMILY_V4
	if a := r.src.Addr(); r.src.IsValid() && a.Is6() {
		nr.Family = netlink.FAMILY_V6
	} else if a := r.dst.Addr(); r.dst.IsValid() && a.Is6() {
		nr.Family = netlink.FAMILY_V6
	}
	nr.Priority = r.priority
	nr.Table = r.table
	nr.Src = ipNet(r.src)
	nr.Dst = ipNet(r.dst)
	if r.mask != 0 {
		nr.Mark = r.mark
		mask := r.mask
		nr.Mask = &mask
	}
	return nr
}

// ruleFromNetlink converts a kernel rule; ok is false for rules with
// selectors we never write (interfaces, tos, inversion, ...), which are
// then never mistaken for ours.
func ruleFromNetlink(nr netlink.Rule) (ipRule, bool) {
	if nr.IifName != "" || nr.OifName != "" || nr.Invert || nr.Tos != 0 || nr.Goto > 0 ||
		nr.IPProto != 0 || nr.Dport != nil || nr.Sport != nil || nr.UIDRange != nil {
		return ipRule{}, false
	}
	r := ipRule{priority: nr.Priority, table: nr.Table, mark: nr.Mark}
	if nr.Mask != nil {
		r.mask = *nr.Mask
	} else if nr.Mark != 0 {
		r.mask = 0xffffffff
	}
	r.src = prefixOf(nr.Src)
	r.dst = prefixOf(nr.Dst)
	return r, true
}

// ensureRule adds want unless the kernel already has it.
func ensureRule(nl *nlHandle, have []netlink.Rule, want ipRule) error {
	for _, nr := range have {
		if r, ok := ruleFromNetlink(nr); ok && r == want {
			return nil
		}
	}
	if err := nl.ruleAdd(want.toNetlink()); err != nil && !isExist(err) {
		return fmt.Errorf("add rule %s: %w", want, err)
	}
	return nil
}

// deleteRules deletes every rule of ours that match selects.
func deleteRules(nl *nlHandle, have []netlink.Rule, match func(ipRule) bool) error {
	for _, nr := range have {
		r, ok := ruleFromNetlink(nr)
		if !ok || !match(r) {
			continue
		}
		if err := nl.ruleDel(r.toNetlink()); err != nil && !isNotExist(err) {
			return fmt.Errorf("delete rule %s: %w", r, err)
		}
	}
	return nil
}

func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

func ipNet(p netip.Prefix) *net.IPNet {
	if !p.IsValid() {
		return nil
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// prefixOf converts a kernel IPv4 prefix; nil or unparsable gives the
// invalid Prefix.
func prefixOf(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.Prefix{}
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}
