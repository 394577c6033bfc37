package sim

import (
	"net/netip"
	"slices"
	"time"
)

type assignResponse struct {
	RequestID          string         `xml:"requestId"`
	NetworkInterfaceID string         `xml:"networkInterfaceId"`
	Addresses          []xmlPrivateIP `xml:"assignedPrivateIpAddressesSet>item"`
	Prefixes           []xmlPrefix    `xml:"assignedIpv4PrefixSet>item"`
}

func (c *Cloud) assignPrivateIPAddresses(r *request) (any, error) {
	p := r.params
	id, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	var req addressRequest
	if err := readCounts(p, &req); err != nil {
		return nil, err
	}
	if req.explicit, err = p.addrs("PrivateIpAddress"); err != nil {
		return nil, err
	}
	for _, s := range p.list("Ipv4Prefix") {
		q, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		req.prefixes = append(req.prefixes, q)
	}
	wantAddrs := req.count > 0 || len(req.explicit) > 0
	wantPrefixes := req.prefixCount > 0 || len(req.prefixes) > 0
	switch {
	case !wantAddrs && !wantPrefixes:
		return nil, errorf(codeMissingParameter, "The request must contain SecondaryPrivateIpAddressCount, PrivateIpAddress.N, Ipv4PrefixCount or Ipv4Prefix.N")
	case wantAddrs && wantPrefixes:
		return nil, errorf(codeInvalidParameterCombination, "Addresses and IPv4 prefixes cannot be assigned in the same request.")
	case req.count > 0 && len(req.explicit) > 0:
		return nil, errorf(codeInvalidParameterCombination, "Specify either SecondaryPrivateIpAddressCount or PrivateIpAddress.N, not both.")
	case req.prefixCount > 0 && len(req.prefixes) > 0:
		return nil, errorf(codeInvalidParameterCombination, "Specify either Ipv4PrefixCount or Ipv4Prefix.N, not both.")
	}
	reassign, _, err := p.boolOpt("AllowReassignment")
	if err != nil {
		return nil, err
	}
	resp := &assignResponse{RequestID: r.id, NetworkInterfaceID: id}
	err = c.update(func(now time.Time) error {
		e, err := c.eniLocked(id)
		if err != nil {
			return err
		}
		if n := e.slots() + req.slots(); n > e.slotLimit() {
			return errorf(codePrivateIPLimitExceeded, "Number of private addresses will exceed limit: %s would hold %d addresses and prefixes, at most %d allowed.", e.id, n, e.slotLimit())
		}
		if wantPrefixes && e.att != nil && !e.att.instance.typ.supportsPrefixes() {
			return errorf(codeInvalidParameterValue, "IPv4 prefixes are not supported by instance type %s of %s (Nitro only).", e.att.instance.typ.name, e.att.instance.id)
		}
		var moved []movedAddr
		if reassign {
			if moved, err = c.takeBackLocked(e, req.explicit); err != nil {
				return err
			}
		}
		g := &grab{sn: e.subnet}
		addrs, prefixes, err := func() ([]netip.Addr, []netip.Prefix, error) {
			if err := req.takeExplicit(g); err != nil {
				return nil, nil, err
			}
			return req.takeAuto(g)
		}()
		if err != nil {
			g.undo()
			for _, m := range moved {
				m.from.subnet.pool.take(m.addr)
				m.from.secondaries = append(m.from.secondaries, m.addr)
			}
			return err
		}
		for _, m := range moved {
			c.emitChangeLocked(AddressesUnassigned, m.from, now, []netip.Addr{m.addr}, nil)
		}
		e.secondaries = append(e.secondaries, addrs...)
		e.prefixes = append(e.prefixes, prefixes...)
		if len(addrs) > 0 {
			c.emitChangeLocked(AddressesAssigned, e, now, addrs, nil)
		}
		if len(prefixes) > 0 {
			c.emitChangeLocked(PrefixesAssigned, e, now, nil, prefixes)
		}
		for _, a := range addrs {
			resp.Addresses = append(resp.Addresses, xmlPrivateIP{PrivateIPAddress: a.String()})
		}
		for _, q := range prefixes {
			resp.Prefixes = append(resp.Prefixes, xmlPrefix{IPv4Prefix: q.String()})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

type movedAddr struct {
	addr netip.Addr
	from *eni
}

// takeBackLocked frees the named addresses that another ENI of the same
// subnet holds as secondaries (AllowReassignment), returning what moved so
// a failed request can put it back. A primary address never moves.
func (c *Cloud) takeBackLocked(to *eni, addrs []netip.Addr) ([]movedAddr, error) {
	var moved []movedAddr
	for _, a := range addrs {
		for _, other := range c.enis {
			if other == to || other.subnet != to.subnet || !other.hasAddress(a) {
				continue
			}
			if other.primary == a {
				return nil, errorf(codeInvalidIPAddressInUse, "The specified address %s is the primary address of %s and cannot be reassigned.", a, other.id)
			}
			other.secondaries = slices.DeleteFunc(other.secondaries, func(x netip.Addr) bool { return x == a })
			other.subnet.pool.release(a)
			moved = append(moved, movedAddr{addr: a, from: other})
		}
	}
	return moved, nil
}

func (c *Cloud) unassignPrivateIPAddresses(r *request) (any, error) {
	p := r.params
	id, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	addrs, err := p.addrs("PrivateIpAddress")
	if err != nil {
		return nil, err
	}
	var prefixes []netip.Prefix
	for _, s := range p.list("Ipv4Prefix") {
		q, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		prefixes = append(prefixes, q)
	}
	if len(addrs) == 0 && len(prefixes) == 0 {
		return nil, errorf(codeMissingParameter, "The request must contain PrivateIpAddress.N or Ipv4Prefix.N")
	}
	err = c.update(func(now time.Time) error {
		e, err := c.eniLocked(id)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if a == e.primary {
				return errorf(codeInvalidParameterValue, "The primary private IP address %s of %s cannot be unassigned.", a, e.id)
			}
			if !slices.Contains(e.secondaries, a) {
				return errorf(codeInvalidParameterValue, "Some of the specified addresses are not assigned to interface %s: %s", e.id, a)
			}
		}
		for _, q := range prefixes {
			if !slices.Contains(e.prefixes, q) {
				return errorf(codeInvalidParameterValue, "Some of the specified prefixes are not assigned to interface %s: %s", e.id, q)
			}
		}
		for _, a := range addrs {
			e.secondaries = slices.DeleteFunc(e.secondaries, func(x netip.Addr) bool { return x == a })
			e.subnet.pool.release(a)
		}
		for _, q := range prefixes {
			e.prefixes = slices.DeleteFunc(e.prefixes, func(x netip.Prefix) bool { return x == q })
			e.subnet.pool.releasePrefix(q)
		}
		if len(addrs) > 0 {
			c.emitChangeLocked(AddressesUnassigned, e, now, addrs, nil)
		}
		if len(prefixes) > 0 {
			c.emitChangeLocked(PrefixesUnassigned, e, now, nil, prefixes)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ok(r), nil
}

// emitChangeLocked publishes an assignment change of e carrying only the
// addresses or prefixes that changed.
func (c *Cloud) emitChangeLocked(kind EventKind, e *eni, now time.Time, addrs []netip.Addr, prefixes []netip.Prefix) {
	ev := eventFor(kind, e, now)
	ev.Addresses, ev.Prefixes = slices.Clone(addrs), slices.Clone(prefixes)
	ev.IPv6Addresses, ev.IPv6Prefixes = nil, nil
	c.emitLocked(ev)
}
