package sim

import (
	"net/netip"
	"slices"
)

// grab takes addresses and prefixes from one subnet for a single request,
// so that a request that fails half way gives back what it took: EC2
// requests are all or nothing.
type grab struct {
	sn       *subnet
	addrs    []netip.Addr
	prefixes []netip.Prefix
	// addrs6 and prefixes6 come from the subnet's IPv6 /64.
	addrs6    []netip.Addr
	prefixes6 []netip.Prefix
}

// addr takes a specific address.
func (g *grab) addr(a netip.Addr) error {
	p := g.sn.pool
	switch {
	case !g.sn.cidr.Contains(a):
		return errorf(codeInvalidParameterValue, "Address %s does not fall within the subnet's address range (%s %s).", a, g.sn.id, g.sn.cidr)
	case p.reserved(a):
		return errorf(codeInvalidParameterValue, "Address %s is reserved by AWS in subnet %s: the first four addresses and the last one of every subnet are.", a, g.sn.id)
	case slices.Contains(g.addrs, a):
		return errorf(codeInvalidParameterValue, "Address %s is given more than once.", a)
	case !p.isFree(a):
		return errorf(codeInvalidIPAddressInUse, "The specified address %s is already in use.", a)
	}
	p.take(a)
	g.addrs = append(g.addrs, a)
	return nil
}

// anyAddrs takes n free addresses.
func (g *grab) anyAddrs(n int) ([]netip.Addr, error) {
	if n == 0 {
		return nil, nil
	}
	got, ok := g.sn.pool.takeAny(n)
	if !ok {
		// Count the whole request against the subnet as it was before
		// the request: what this request took already (its primary
		// address, named addresses and prefixes) goes back on failure,
		// so that is the free count DescribeSubnets shows the operator.
		held := g.held()
		return nil, errorf(codeInsufficientFreeAddresses, "The specified subnet %s does not have enough free addresses to satisfy the request: %d requested, %d free.", g.sn.id, held+n, g.sn.pool.free+held)
	}
	g.addrs = append(g.addrs, got...)
	return got, nil
}

// prefix takes a specific /28.
func (g *grab) prefix(q netip.Prefix) error {
	if !g.sn.cidr.Contains(q.Addr()) {
		return errorf(codeInvalidParameterValue, "Prefix %s does not fall within the subnet's address range (%s %s).", q, g.sn.id, g.sn.cidr)
	}
	if !g.sn.pool.prefixFree(q) {
		return errorf(codeInvalidParameterValue, "Prefix %s is not free in subnet %s: some of its addresses are in use or reserved.", q, g.sn.id)
	}
	g.sn.pool.takePrefix(q)
	g.prefixes = append(g.prefixes, q)
	return nil
}

// anyPrefixes takes n free aligned /28s.
func (g *grab) anyPrefixes(n int) ([]netip.Prefix, error) {
	if n == 0 {
		return nil, nil
	}
	got, ok := g.sn.pool.takeAnyPrefixes(n)
	if !ok {
		return nil, errorf(codeInsufficientCidrBlocks, "There are not enough free cidr blocks in the specified subnet %s to satisfy the request: %d /28 requested (%d addresses free, possibly fragmented).", g.sn.id, n, g.sn.pool.free+g.held())
	}
	g.prefixes = append(g.prefixes, got...)
	return got, nil
}

// held counts the addresses this request has taken so far, a /28 as 16.
func (g *grab) held() int { return len(g.addrs) + 16*len(g.prefixes) }

// undo gives everything back.
func (g *grab) undo() {
	for _, a := range g.addrs {
		g.sn.pool.release(a)
	}
	for _, q := range g.prefixes {
		g.sn.pool.releasePrefix(q)
	}
	for _, a := range g.addrs6 {
		g.sn.ipv6.pool.release(a)
	}
	for _, q := range g.prefixes6 {
		g.sn.ipv6.pool.releasePrefix(q)
	}
	g.addrs, g.prefixes, g.addrs6, g.prefixes6 = nil, nil, nil, nil
}

// addressRequest is the address part of CreateNetworkInterface and
// AssignPrivateIpAddresses: counts or explicit lists, never both.
type addressRequest struct {
	count       int
	explicit    []netip.Addr
	prefixCount int
	prefixes    []netip.Prefix
}

func (a addressRequest) slots() int {
	return a.count + len(a.explicit) + a.prefixCount + len(a.prefixes)
}

// takeExplicit grabs the addresses and prefixes the request names; it
// runs before takeAuto so that an automatic pick never steals a named
// address.
func (a addressRequest) takeExplicit(g *grab) error {
	for _, x := range a.explicit {
		if err := g.addr(x); err != nil {
			return err
		}
	}
	for _, q := range a.prefixes {
		if err := g.prefix(q); err != nil {
			return err
		}
	}
	return nil
}

// takeAuto grabs the counted addresses and prefixes and returns every
// secondary address and prefix of the request.
func (a addressRequest) takeAuto(g *grab) (addrs []netip.Addr, prefixes []netip.Prefix, err error) {
	got, err := g.anyAddrs(a.count)
	if err != nil {
		return nil, nil, err
	}
	gotP, err := g.anyPrefixes(a.prefixCount)
	if err != nil {
		return nil, nil, err
	}
	return append(slices.Clone(a.explicit), got...), append(slices.Clone(a.prefixes), gotP...), nil
}
