package sim

import (
	"net/netip"
	"slices"
)

// ipv6Request is the IPv6 part of CreateNetworkInterface and
// AssignIpv6Addresses: counts or explicit lists, never both, and
// addresses or prefixes, never both.
type ipv6Request struct {
	count       int
	explicit    []netip.Addr
	prefixCount int
	prefixes    []netip.Prefix
}

func (r ipv6Request) slots() int {
	return r.count + len(r.explicit) + r.prefixCount + len(r.prefixes)
}

func (r ipv6Request) wantsPrefixes() bool { return r.prefixCount > 0 || len(r.prefixes) > 0 }

// check refuses the combinations EC2 refuses: "You can't specify a count
// of IPv6 prefixes if you've specified one of the following: specific
// IPv6 prefixes, specific IPv6 addresses, or a count of IPv6 addresses",
// and the same for the other three.
func (r ipv6Request) check() error {
	switch {
	case r.count > 0 && len(r.explicit) > 0:
		return errorf(codeInvalidParameterCombination, "Specify either Ipv6AddressCount or Ipv6Addresses, not both.")
	case r.prefixCount > 0 && len(r.prefixes) > 0:
		return errorf(codeInvalidParameterCombination, "Specify either Ipv6PrefixCount or Ipv6Prefix, not both.")
	case r.wantsPrefixes() && (r.count > 0 || len(r.explicit) > 0):
		return errorf(codeInvalidParameterCombination, "IPv6 addresses and IPv6 prefixes cannot be assigned in the same request.")
	}
	return nil
}

// take grabs the request's IPv6 addresses and /80s from g's subnet,
// named ones first so that an automatic pick never steals a named one.
func (r ipv6Request) take(g *grab) ([]netip.Addr, []netip.Prefix, error) {
	if r.slots() == 0 {
		return nil, nil, nil
	}
	sn := g.sn
	if sn.ipv6 == nil {
		return nil, nil, errorf(codeInvalidParameterValue, "The subnet %s has no IPv6 CIDR block: associate one (AssociateSubnetCidrBlock) before assigning IPv6 addresses or prefixes.", sn.id)
	}
	p := sn.ipv6.pool
	for _, a := range r.explicit {
		switch {
		case !p.cidr.Contains(a):
			return nil, nil, errorf(codeInvalidParameterValue, "Address %s does not fall within the subnet's IPv6 address range (%s %s).", a, sn.id, p.cidr)
		case p.reserved(a):
			return nil, nil, errorf(codeInvalidParameterValue, "Address %s is reserved by AWS in subnet %s: the first four addresses and the last one of every subnet are.", a, sn.id)
		case slices.Contains(g.addrs6, a):
			return nil, nil, errorf(codeInvalidParameterValue, "Address %s is given more than once.", a)
		case !p.isFree(a):
			return nil, nil, errorf(codeInvalidIPAddressInUse, "The specified address %s is already in use.", a)
		}
		p.take(a)
		g.addrs6 = append(g.addrs6, a)
	}
	for _, q := range r.prefixes {
		if !p.cidr.Contains(q.Addr()) {
			return nil, nil, errorf(codeInvalidParameterValue, "Prefix %s does not fall within the subnet's IPv6 address range (%s %s).", q, sn.id, p.cidr)
		}
		if coversReserved(q) {
			return nil, nil, errorf(codeInvalidParameterValue, "Prefix %s covers addresses AWS reserves in subnet %s: the first four addresses and the last one of every subnet.", q, sn.id)
		}
		if !p.prefixFree(q) {
			return nil, nil, errorf(codeInvalidIPAddressInUse, "The specified prefix %s is already in use in subnet %s, or covers an address that is.", q, sn.id)
		}
		p.takePrefix(q)
		g.prefixes6 = append(g.prefixes6, q)
	}
	got := p.takeAny(r.count)
	g.addrs6 = append(g.addrs6, got...)
	gotP, ok := p.takeAnyPrefixes(r.prefixCount)
	if !ok {
		return nil, nil, errorf(codeInsufficientCidrBlocks, "There are not enough free cidr blocks in the specified subnet %s to satisfy the request: %d /80 requested.", sn.id, r.prefixCount)
	}
	g.prefixes6 = append(g.prefixes6, gotP...)
	return append(slices.Clone(r.explicit), got...), append(slices.Clone(r.prefixes), gotP...), nil
}

// parseIPv6Addr reads one IPv6 address of a request.
func parseIPv6Addr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return netip.Addr{}, errorf(codeInvalidParameterValue, "Invalid IPv6 address: %s", s)
	}
	return a, nil
}

// parseIPv6Prefix80 reads one /80 prefix of a request.
func parseIPv6Prefix80(s string) (netip.Prefix, error) {
	q, err := netip.ParsePrefix(s)
	if err != nil || !q.Addr().Is6() || q.Addr().Is4In6() || q.Bits() != ipv6PrefixLen || q.Masked() != q {
		return netip.Prefix{}, errorf(codeInvalidParameterValue, "Invalid IPv6 prefix %s: want an aligned /80 such as 2600:1f14:abc:de01:1::/80", s)
	}
	return q, nil
}

// readIPv6Counts reads Ipv6AddressCount and Ipv6PrefixCount; a count
// below zero is invalid, zero is none.
func readIPv6Counts(p fields, r *ipv6Request) error {
	counts := []struct {
		name string
		dst  *int
	}{{"Ipv6AddressCount", &r.count}, {"Ipv6PrefixCount", &r.prefixCount}}
	for _, c := range counts {
		name, dst := c.name, c.dst
		n, _, err := p.intOpt(name)
		if err != nil {
			return err
		}
		if n < 0 {
			return errorf(codeInvalidParameterValue, "Value (%d) for parameter %s is invalid. Expecting a value of at least 0.", n, name)
		}
		*dst = n
	}
	return nil
}
