package sim

import (
	"net/netip"
	"slices"
	"time"
)

type assignIPv6Response struct {
	RequestID          string   `xml:"requestId"`
	NetworkInterfaceID string   `xml:"networkInterfaceId"`
	Addresses          []string `xml:"assignedIpv6Addresses>item"`
	Prefixes           []string `xml:"assignedIpv6PrefixSet>item"`
}

// parseIPv6Lists reads the named IPv6 addresses and /80 prefixes of
// AssignIpv6Addresses and UnassignIpv6Addresses (Ipv6Addresses.N,
// Ipv6Prefix.N: lists of strings in both).
func parseIPv6Lists(p fields) (addrs []netip.Addr, prefixes []netip.Prefix, err error) {
	for _, s := range p.list("Ipv6Addresses") {
		a, err := parseIPv6Addr(s)
		if err != nil {
			return nil, nil, err
		}
		addrs = append(addrs, a)
	}
	for _, s := range p.list("Ipv6Prefix") {
		q, err := parseIPv6Prefix80(s)
		if err != nil {
			return nil, nil, err
		}
		prefixes = append(prefixes, q)
	}
	return addrs, prefixes, nil
}

func (c *Cloud) assignIPv6Addresses(r *request) (any, error) {
	p := r.params
	id, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	var req ipv6Request
	if err := readIPv6Counts(p, &req); err != nil {
		return nil, err
	}
	if req.explicit, req.prefixes, err = parseIPv6Lists(p); err != nil {
		return nil, err
	}
	if req.slots() == 0 {
		return nil, errorf(codeMissingParameter, "The request must contain Ipv6AddressCount, Ipv6Addresses.N, Ipv6PrefixCount or Ipv6Prefix.N")
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	resp := &assignIPv6Response{RequestID: r.id, NetworkInterfaceID: id}
	err = c.update(func(now time.Time) error {
		e, err := c.eniLocked(id)
		if err != nil {
			return err
		}
		if e.subnet.ipv6 == nil {
			return errorf(codeInvalidParameterValue, "The subnet %s of %s has no IPv6 CIDR block: associate one (AssociateSubnetCidrBlock) before assigning IPv6 addresses or prefixes.", e.subnet.id, e.id)
		}
		if n := e.ipv6Slots() + req.slots(); n > e.slotLimit() {
			return errorf(codePrivateIPLimitExceeded, "Number of IPv6 addresses will exceed limit: %s would hold %d IPv6 addresses and prefixes, at most %d allowed.", e.id, n, e.slotLimit())
		}
		if req.wantsPrefixes() && e.att != nil && !e.att.instance.typ.supportsPrefixes() {
			return errorf(codeInvalidParameterValue, "IPv6 prefixes are not supported by instance type %s of %s (Nitro only).", e.att.instance.typ.name, e.att.instance.id)
		}
		g := &grab{sn: e.subnet}
		addrs, prefixes, err := req.take(g)
		if err != nil {
			g.undo()
			return err
		}
		e.ipv6s = append(e.ipv6s, addrs...)
		e.ipv6Prefixes = append(e.ipv6Prefixes, prefixes...)
		c.emitIPv6ChangeLocked(e, now, true, addrs, prefixes)
		for _, a := range addrs {
			resp.Addresses = append(resp.Addresses, a.String())
		}
		for _, q := range prefixes {
			resp.Prefixes = append(resp.Prefixes, q.String())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

type unassignIPv6Response struct {
	RequestID          string   `xml:"requestId"`
	NetworkInterfaceID string   `xml:"networkInterfaceId"`
	Addresses          []string `xml:"unassignedIpv6Addresses>item"`
	Prefixes           []string `xml:"unassignedIpv6PrefixSet>item"`
}

func (c *Cloud) unassignIPv6Addresses(r *request) (any, error) {
	p := r.params
	id, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	addrs, prefixes, err := parseIPv6Lists(p)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 && len(prefixes) == 0 {
		return nil, errorf(codeMissingParameter, "The request must contain Ipv6Addresses.N or Ipv6Prefix.N")
	}
	resp := &unassignIPv6Response{RequestID: r.id, NetworkInterfaceID: id}
	err = c.update(func(now time.Time) error {
		e, err := c.eniLocked(id)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if !slices.Contains(e.ipv6s, a) {
				return errorf(codeInvalidParameterValue, "Some of the specified IPv6 addresses are not assigned to interface %s: %s", e.id, a)
			}
		}
		for _, q := range prefixes {
			if !slices.Contains(e.ipv6Prefixes, q) {
				return errorf(codeInvalidParameterValue, "Some of the specified IPv6 prefixes are not assigned to interface %s: %s", e.id, q)
			}
		}
		for _, a := range addrs {
			e.ipv6s = slices.DeleteFunc(e.ipv6s, func(x netip.Addr) bool { return x == a })
			e.subnet.ipv6.pool.release(a)
			resp.Addresses = append(resp.Addresses, a.String())
		}
		for _, q := range prefixes {
			e.ipv6Prefixes = slices.DeleteFunc(e.ipv6Prefixes, func(x netip.Prefix) bool { return x == q })
			e.subnet.ipv6.pool.releasePrefix(q)
			resp.Prefixes = append(resp.Prefixes, q.String())
		}
		c.emitIPv6ChangeLocked(e, now, false, addrs, prefixes)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// emitIPv6ChangeLocked publishes the IPv6 addresses and prefixes that e
// gained (assigned) or lost, one event for each kind that changed.
func (c *Cloud) emitIPv6ChangeLocked(e *eni, now time.Time, assigned bool, addrs []netip.Addr, prefixes []netip.Prefix) {
	addrKind, prefixKind := IPv6AddressesUnassigned, IPv6PrefixesUnassigned
	if assigned {
		addrKind, prefixKind = IPv6AddressesAssigned, IPv6PrefixesAssigned
	}
	if len(addrs) > 0 {
		ev := eventFor(addrKind, e, now)
		ev.Addresses, ev.Prefixes = nil, nil
		ev.IPv6Addresses, ev.IPv6Prefixes = slices.Clone(addrs), nil
		c.emitLocked(ev)
	}
	if len(prefixes) > 0 {
		ev := eventFor(prefixKind, e, now)
		ev.Addresses, ev.Prefixes = nil, nil
		ev.IPv6Addresses, ev.IPv6Prefixes = nil, slices.Clone(prefixes)
		c.emitLocked(ev)
	}
}
