package sim

import (
	"net/netip"
	"net/url"
	"slices"
	"time"
)

// clientTokenRecord remembers a CreateNetworkInterface by its ClientToken:
// the same token with the same parameters returns the same ENI, with other
// parameters it is IdempotentParameterMismatch.
type clientTokenRecord struct {
	fingerprint string
	eniID       string
	created     xmlENI // answered again if the ENI has since been deleted
}

type createENIResponse struct {
	RequestID        string `xml:"requestId"`
	NetworkInterface xmlENI `xml:"networkInterface"`
	ClientToken      string `xml:"clientToken,omitempty"`
}

func (c *Cloud) createNetworkInterface(r *request) (any, error) {
	p := r.params
	subnetID, err := p.required("SubnetId")
	if err != nil {
		return nil, err
	}
	req, primary, err := parseCreateAddresses(p)
	if err != nil {
		return nil, err
	}
	req6, countGiven, err := parseCreateIPv6(p)
	if err != nil {
		return nil, err
	}
	tags, err := p.tagSpecs("network-interface")
	if err != nil {
		return nil, err
	}
	groups := p.list("SecurityGroupId")
	ct, _, err := parseConnTrack(p)
	if err != nil {
		return nil, err
	}
	token := p.get("ClientToken")
	itype, err := parseInterfaceType(p.get("InterfaceType"))
	if err != nil {
		return nil, err
	}
	if itype == interfaceEFAOnly && (primary.IsValid() || req.slots() > 0 || req6.slots() > 0) {
		return nil, errorf(codeInvalidParameterCombination, "An efa-only network interface has no IP addresses; do not specify private IPv4 or IPv6 addresses or prefixes.")
	}
	resp := &createENIResponse{RequestID: r.id, ClientToken: token}
	err = c.update(func(now time.Time) error {
		fp := fingerprint(p.v)
		if rec, ok := c.clientTokens[token]; ok && token != "" {
			if rec.fingerprint != fp {
				return errorf(codeIdempotentParameterMismatch, "Client token %s was already used by a different CreateNetworkInterface request.", token)
			}
			resp.NetworkInterface = rec.created
			if e, ok := c.enis[rec.eniID]; ok {
				resp.NetworkInterface = c.xmlENI(e)
			}
			return nil
		}
		sn, ok := c.subnets[subnetID]
		if !ok {
			return errorf(codeInvalidSubnetNotFound, "The subnet ID '%s' does not exist", subnetID)
		}
		if err := c.checkGroupsLocked(groups); err != nil {
			return err
		}
		if len(groups) == 0 {
			groups = []string{c.groups[0]}
		}
		if n := 1 + req.slots(); n > maxSlotsUnattached {
			return errorf(codePrivateIPLimitExceeded, "Number of private addresses will exceed limit: %d requested, an ENI holds at most %d.", n, maxSlotsUnattached)
		}
		// A subnet that assigns IPv6 on creation gives one address
		// unless the request counts its own (0 included, which opts out).
		if sn.assignIPv6OnCreation && !countGiven && req6.slots() == 0 && itype != interfaceEFAOnly {
			req6.count = 1
		}
		if n := req6.slots(); n > maxSlotsUnattached {
			return errorf(codePrivateIPLimitExceeded, "Number of IPv6 addresses will exceed limit: %d requested, an ENI holds at most %d.", n, maxSlotsUnattached)
		}
		var addrs, addrs6 []netip.Addr
		var prefixes, prefixes6 []netip.Prefix
		if itype != interfaceEFAOnly {
			g := &grab{sn: sn}
			var err error
			addrs, prefixes, err = takeForCreate(g, primary, req)
			if err == nil {
				addrs6, prefixes6, err = req6.take(g)
			}
			if err != nil {
				g.undo()
				return err
			}
			primary = addrs[0]
			addrs = addrs[1:]
		}
		e := c.newENILocked(sn, primary, groups, p.get("Description"))
		e.secondaries, e.prefixes, e.interfaceType, e.connTrack = addrs, prefixes, itype, ct
		e.ipv6s, e.ipv6Prefixes = addrs6, prefixes6
		for _, t := range tags {
			e.tags[t.key] = t.value
		}
		resp.NetworkInterface = c.xmlENI(e)
		if token != "" {
			c.clientTokens[token] = clientTokenRecord{fingerprint: fp, eniID: e.id, created: resp.NetworkInterface}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// EC2's interface types (NetworkInterface.InterfaceType) that
// CreateNetworkInterface makes; "interface" is the ordinary ENI.
const (
	interfaceNormal  = "interface"
	interfaceEFA     = "efa"
	interfaceEFAOnly = "efa-only"
	interfaceTrunk   = "trunk"
)

// parseInterfaceType reads CreateNetworkInterface's InterfaceType
// (NetworkInterfaceCreationType); absent is an ordinary ENI. Branch
// interfaces belong to a trunk and its owner (the VPC resource
// controller); the emulator does not model them.
func parseInterfaceType(s string) (string, error) {
	switch s {
	case "":
		return interfaceNormal, nil
	case interfaceEFA, interfaceEFAOnly, interfaceTrunk:
		return s, nil
	case "branch":
		return "", errorf(codeInvalidParameterValue, "Value (branch) for parameter InterfaceType is not supported by the emulator: branch interfaces belong to a trunk's owner.")
	}
	return "", errorf(codeInvalidParameterValue, "Value (%s) for parameter InterfaceType is invalid. Expecting one of: efa, efa-only, trunk.", s)
}

// takeForCreate grabs a new ENI's addresses, named ones first; the
// primary address comes back first.
func takeForCreate(g *grab, primary netip.Addr, req addressRequest) ([]netip.Addr, []netip.Prefix, error) {
	if primary.IsValid() {
		if err := g.addr(primary); err != nil {
			return nil, nil, err
		}
	}
	if err := req.takeExplicit(g); err != nil {
		return nil, nil, err
	}
	if !primary.IsValid() {
		got, err := g.anyAddrs(1)
		if err != nil {
			return nil, nil, err
		}
		primary = got[0]
	}
	addrs, prefixes, err := req.takeAuto(g)
	if err != nil {
		return nil, nil, err
	}
	return append([]netip.Addr{primary}, addrs...), prefixes, nil
}

// parseCreateAddresses reads the address parameters of
// CreateNetworkInterface; primary is invalid when EC2 should pick it.
func parseCreateAddresses(p fields) (req addressRequest, primary netip.Addr, err error) {
	if s := p.get("PrivateIpAddress"); s != "" {
		if primary, err = parseAddr(s); err != nil {
			return req, primary, err
		}
	}
	for _, spec := range p.structs("PrivateIpAddresses") {
		a, err := parseAddr(spec.get("PrivateIpAddress"))
		if err != nil {
			return req, primary, err
		}
		isPrimary, _, err := spec.boolOpt("Primary")
		if err != nil {
			return req, primary, err
		}
		switch {
		case !isPrimary:
			req.explicit = append(req.explicit, a)
		case primary.IsValid() && primary != a:
			return req, primary, errorf(codeInvalidParameterCombination, "Only one primary private IP address can be specified; got %s and %s.", primary, a)
		default:
			primary = a
		}
	}
	if err := readCounts(p, &req); err != nil {
		return req, primary, err
	}
	for _, spec := range p.structs("Ipv4Prefix") {
		q, err := parsePrefix(spec.get("Ipv4Prefix"))
		if err != nil {
			return req, primary, err
		}
		req.prefixes = append(req.prefixes, q)
	}
	if req.prefixCount > 0 && len(req.prefixes) > 0 {
		return req, primary, errorf(codeInvalidParameterCombination, "Specify either Ipv4PrefixCount or Ipv4Prefix.N, not both.")
	}
	if req.count > 0 && len(req.explicit) > 0 {
		return req, primary, errorf(codeInvalidParameterCombination, "Specify either SecondaryPrivateIpAddressCount or secondary PrivateIpAddresses.N, not both.")
	}
	return req, primary, nil
}

// parseCreateIPv6 reads the IPv6 parameters of CreateNetworkInterface
// (Ipv6Addresses.N.Ipv6Address and Ipv6Prefix.N.Ipv6Prefix are lists of
// structures here, unlike AssignIpv6Addresses' lists of strings).
// countGiven reports an explicit Ipv6AddressCount, 0 included.
func parseCreateIPv6(p fields) (r ipv6Request, countGiven bool, err error) {
	if err := readIPv6Counts(p, &r); err != nil {
		return r, false, err
	}
	countGiven = p.get("Ipv6AddressCount") != ""
	for _, spec := range p.structs("Ipv6Addresses") {
		a, err := parseIPv6Addr(spec.get("Ipv6Address"))
		if err != nil {
			return r, false, err
		}
		r.explicit = append(r.explicit, a)
	}
	for _, spec := range p.structs("Ipv6Prefix") {
		q, err := parseIPv6Prefix80(spec.get("Ipv6Prefix"))
		if err != nil {
			return r, false, err
		}
		r.prefixes = append(r.prefixes, q)
	}
	if p.has("EnablePrimaryIpv6") {
		return r, false, errorf(codeInvalidParameterValue, "Parameter EnablePrimaryIpv6 is not supported by the emulator.")
	}
	return r, countGiven, r.check()
}

// readCounts reads SecondaryPrivateIpAddressCount and Ipv4PrefixCount.
func readCounts(p fields, req *addressRequest) error {
	counts := []struct {
		name string
		dst  *int
	}{{"SecondaryPrivateIpAddressCount", &req.count}, {"Ipv4PrefixCount", &req.prefixCount}}
	for _, c := range counts {
		name, dst := c.name, c.dst
		n, ok, err := p.intOpt(name)
		if err != nil {
			return err
		}
		if ok && n < 1 {
			return errorf(codeInvalidParameterValue, "Value (%d) for parameter %s is invalid. Expecting a value of at least 1.", n, name)
		}
		*dst = n
	}
	return nil
}

func (c *Cloud) checkGroupsLocked(groups []string) error {
	for _, g := range groups {
		if !slices.Contains(c.groups, g) {
			return errorf(codeInvalidGroupNotFound, "The security group '%s' does not exist in VPC '%s'", g, c.vpcID)
		}
	}
	return nil
}

// fingerprint identifies a request's parameters apart from the token
// itself, for ClientToken idempotency.
func fingerprint(v url.Values) string {
	w := url.Values{}
	for k, vals := range v {
		if k != "ClientToken" && k != "DryRun" {
			w[k] = vals
		}
	}
	return w.Encode() // sorted by key
}

func (c *Cloud) deleteNetworkInterface(r *request) (any, error) {
	id, err := r.params.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	err = c.update(func(time.Time) error {
		e, err := c.eniLocked(id)
		if err != nil {
			return err
		}
		if e.att != nil {
			return errorf(codeInvalidParameterValue, "Network interface '%s' is currently in use.", id)
		}
		c.deleteENILocked(e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ok(r), nil
}

func (c *Cloud) eniLocked(id string) (*eni, error) {
	e, ok := c.enis[id]
	if !ok {
		return nil, errorf(codeInvalidENINotFound, "The networkInterface ID '%s' does not exist", id)
	}
	return e, nil
}
