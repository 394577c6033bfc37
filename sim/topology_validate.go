package sim

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// validate checks the topology for mistakes a user can fix, naming the
// offending entry. It fills nothing in: defaults are applied by NewCloud.
func (t *Topology) validate() error {
	if t.Region == "" {
		return errors.New("region is required (for example us-west-2)")
	}
	if t.VPC.ID == "" {
		return errors.New("vpc.id is required")
	}
	if len(t.VPC.CIDRs) == 0 {
		return fmt.Errorf("vpc %s: cidrs needs at least one IPv4 CIDR", t.VPC.ID)
	}
	var vpcCIDRs []netip.Prefix
	for _, c := range t.VPC.CIDRs {
		p, err := parseIPv4Prefix(c)
		if err != nil {
			return at("vpc.cidrs", fmt.Errorf("vpc %s: %w", t.VPC.ID, err))
		}
		if p.Bits() < 16 || p.Bits() > 28 {
			return at("vpc.cidrs", fmt.Errorf("vpc %s: cidr %s: EC2 allows /16 to /28", t.VPC.ID, c))
		}
		vpcCIDRs = append(vpcCIDRs, p)
	}
	var vpc6 netip.Prefix
	if t.VPC.IPv6CIDR != "" {
		p, err := parseIPv6Prefix(t.VPC.IPv6CIDR, 56)
		if err != nil {
			return at("vpc.ipv6Cidr", fmt.Errorf("vpc %s: ipv6Cidr: %w", t.VPC.ID, err))
		}
		vpc6 = p
	}
	if len(t.Subnets) == 0 {
		return errors.New("subnets: at least one subnet is required")
	}
	subnets := map[string]bool{}
	var seen []netip.Prefix
	for i, s := range t.Subnets {
		if s.ID == "" {
			return at(fmt.Sprintf("subnets[%d]", i), fmt.Errorf("subnets[%d]: id is required", i))
		}
		if subnets[s.ID] {
			return at(fmt.Sprintf("subnets[%d]", i), fmt.Errorf("subnet %s: duplicate id", s.ID))
		}
		subnets[s.ID] = true
		if !strings.HasPrefix(s.AZ, t.Region) {
			return at(fmt.Sprintf("subnets[%d]", i), fmt.Errorf("subnet %s: az %q is not in region %s (want e.g. %sa)", s.ID, s.AZ, t.Region, t.Region))
		}
		p, err := parseIPv4Prefix(s.CIDR)
		if err != nil {
			return at(fmt.Sprintf("subnets[%d]", i), fmt.Errorf("subnet %s: %w", s.ID, err))
		}
		if p.Bits() < 16 || p.Bits() > 28 {
			return at(fmt.Sprintf("subnets[%d]", i), fmt.Errorf("subnet %s: cidr %s: EC2 allows /16 to /28", s.ID, s.CIDR))
		}
		if !insideAny(p, vpcCIDRs) {
			return at(fmt.Sprintf("subnets[%d]", i), fmt.Errorf("subnet %s: cidr %s is outside the VPC cidrs %v", s.ID, s.CIDR, t.VPC.CIDRs))
		}
		for _, o := range seen {
			if o.Overlaps(p) {
				return at(fmt.Sprintf("subnets[%d]", i), fmt.Errorf("subnet %s: cidr %s overlaps %s", s.ID, s.CIDR, o))
			}
		}
		seen = append(seen, p)
		if err := s.validateIPv6(vpc6, t.Subnets[:i]); err != nil {
			return at(fmt.Sprintf("subnets[%d]", i), fmt.Errorf("subnet %s: %w", s.ID, err))
		}
	}
	if len(t.SecurityGroups) == 0 {
		return errors.New("securityGroups: at least one group is required (the first is the VPC default)")
	}
	groups := map[string]bool{}
	for _, g := range t.SecurityGroups {
		groups[g] = true
	}
	custom := map[string]bool{}
	for i, it := range t.InstanceTypes {
		switch {
		case it.Name == "":
			return at(fmt.Sprintf("instanceTypes[%d]", i), fmt.Errorf("instanceTypes[%d]: name is required", i))
		case it.MaxENIs < 1:
			return at(fmt.Sprintf("instanceTypes[%d]", i), fmt.Errorf("instance type %s: maxENIs must be at least 1", it.Name))
		case it.IPv4PerENI < 1:
			return at(fmt.Sprintf("instanceTypes[%d]", i), fmt.Errorf("instance type %s: ipv4PerENI must be at least 1", it.Name))
		case it.Hypervisor != "" && it.Hypervisor != "nitro" && it.Hypervisor != "xen":
			return at(fmt.Sprintf("instanceTypes[%d]", i), fmt.Errorf("instance type %s: hypervisor %q: want nitro or xen", it.Name, it.Hypervisor))
		case len(it.NetworkCards) > 0 && it.NetworkCards[0] != it.MaxENIs:
			return at(fmt.Sprintf("instanceTypes[%d].networkCards", i), fmt.Errorf("instance type %s: networkCards[0] is %d, but card 0 takes maxENIs (%d)", it.Name, it.NetworkCards[0], it.MaxENIs))
		case slices.ContainsFunc(it.NetworkCards, func(n int) bool { return n < 1 }):
			return at(fmt.Sprintf("instanceTypes[%d].networkCards", i), fmt.Errorf("instance type %s: networkCards %v: every card takes at least 1 ENI", it.Name, it.NetworkCards))
		}
		custom[it.Name] = true
	}
	ids := map[string]bool{}
	for i, in := range t.Instances {
		if in.ID == "" {
			return at(fmt.Sprintf("instances[%d]", i), fmt.Errorf("instances[%d]: id is required", i))
		}
		if ids[in.ID] {
			return at(fmt.Sprintf("instances[%d]", i), fmt.Errorf("instance %s: duplicate id", in.ID))
		}
		ids[in.ID] = true
		if !subnets[in.Subnet] {
			return at(fmt.Sprintf("instances[%d]", i), fmt.Errorf("instance %s: subnet %q is not defined in subnets", in.ID, in.Subnet))
		}
		if _, ok := lookupType(in.Type, t.InstanceTypes); !ok {
			return at(fmt.Sprintf("instances[%d]", i), fmt.Errorf("instance %s: instance type %q is unknown: add it to instanceTypes with maxENIs and ipv4PerENI", in.ID, in.Type))
		}
		for _, g := range in.SecurityGroups {
			if !groups[g] {
				return at(fmt.Sprintf("instances[%d]", i), fmt.Errorf("instance %s: security group %s is not defined in securityGroups", in.ID, g))
			}
		}
		if _, ok := t.Roles[in.Role]; in.Role != "" && !ok {
			return at(fmt.Sprintf("instances[%d]", i), fmt.Errorf("instance %s: role %q is not defined in roles", in.ID, in.Role))
		}
		if in.PrivateIP != "" {
			if _, err := netip.ParseAddr(in.PrivateIP); err != nil {
				return at(fmt.Sprintf("instances[%d]", i), fmt.Errorf("instance %s: privateIp: %w", in.ID, err))
			}
		}
		if err := in.validateInterfaces(t, i); err != nil {
			return err
		}
		if err := in.ConnectionTracking.validate(); err != nil {
			return at(fmt.Sprintf("instances[%d].connectionTracking", i), fmt.Errorf("instance %s: %w", in.ID, err))
		}
	}
	for name, d := range map[string]Duration{"attachDelay": t.AttachDelay, "detachDelay": t.DetachDelay, "imdsLag": t.IMDSLag} {
		if d < 0 {
			return fmt.Errorf("%s must not be negative", name)
		}
	}
	if err := t.Throttle.validate(); err != nil {
		return err
	}
	for action, f := range t.Faults {
		if action != "*" && lookupAction(action) == nil {
			return at("faults."+action, fmt.Errorf("faults.%s: no such action (want one the emulator serves, e.g. AttachNetworkInterface, or * for all)", action))
		}
		if err := f.Fault().validate(); err != nil {
			return at("faults."+action, fmt.Errorf("faults.%s: %w", action, err))
		}
	}
	for name, r := range t.Roles {
		for _, action := range r.Deny {
			if lookupAction(action) == nil {
				return at("roles."+name, fmt.Errorf("roles.%s: deny: no such action %q (want one the emulator serves, e.g. DeleteNetworkInterface)", name, action))
			}
		}
	}
	switch t.AddressOrder {
	case "", "sequential", "random":
	default:
		return at("addressOrder", fmt.Errorf("addressOrder %q: want sequential or random", t.AddressOrder))
	}
	return nil
}

func (s ThrottleSpec) validate() error {
	check := func(name string, b BucketSpec) error {
		switch {
		case b.Burst < 0 || b.Refill < 0:
			return fmt.Errorf("throttle.%s: burst and refill must not be negative", name)
		case b != (BucketSpec{}) && b.Burst < 1:
			return fmt.Errorf("throttle.%s: burst must be at least 1, or the bucket refuses every request", name)
		}
		return nil
	}
	if err := check("mutating", s.Mutating); err != nil {
		return err
	}
	if err := check("describe", s.Describe); err != nil {
		return err
	}
	for a, b := range s.Actions {
		if lookupAction(a) == nil {
			return fmt.Errorf("throttle.actions.%s: no such action", a)
		}
		if err := check("actions."+a, b); err != nil {
			return err
		}
	}
	return nil
}

func parseIPv4Prefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("cidr %q: %w", s, err)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("cidr %q: only IPv4 is emulated", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("cidr %q has host bits set (did you mean %s?)", s, p.Masked())
	}
	return p, nil
}

// validateIPv6 checks a subnet's IPv6 settings against the VPC's /56
// (invalid when the VPC has none) and the subnets before it.
func (s SubnetSpec) validateIPv6(vpc6 netip.Prefix, before []SubnetSpec) error {
	if s.IPv6CIDR == "" {
		switch {
		case s.IPv6Native:
			return errors.New("ipv6Native needs ipv6Cidr: an IPv6-only subnet has an IPv6 /64")
		case s.AssignIPv6AddressOnCreation:
			return errors.New("assignIpv6AddressOnCreation needs ipv6Cidr")
		}
		return nil
	}
	p, err := parseIPv6Prefix(s.IPv6CIDR, 64)
	if err != nil {
		return fmt.Errorf("ipv6Cidr: %w", err)
	}
	if !vpc6.IsValid() {
		return fmt.Errorf("ipv6Cidr %s: the VPC has no ipv6Cidr", p)
	}
	if !vpc6.Contains(p.Addr()) {
		return fmt.Errorf("ipv6Cidr %s is outside the VPC's %s", p, vpc6)
	}
	for _, o := range before {
		if q, _ := netip.ParsePrefix(o.IPv6CIDR); q == p { // checked before
			return fmt.Errorf("ipv6Cidr %s is subnet %s's too", p, o.ID)
		}
	}
	return nil
}

// parseIPv6Prefix reads an IPv6 CIDR of exactly bits bits, the only
// sizes Amazon-provided blocks come in (/56 for a VPC, /64 for a subnet).
func parseIPv6Prefix(s string, bits int) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return netip.Prefix{}, fmt.Errorf("cidr %q: %w", s, err)
	case !p.Addr().Is6() || p.Addr().Is4In6():
		return netip.Prefix{}, fmt.Errorf("cidr %q is not IPv6", s)
	case p.Bits() != bits:
		return netip.Prefix{}, fmt.Errorf("cidr %q: want a /%d", s, bits)
	case p.Masked() != p:
		return netip.Prefix{}, fmt.Errorf("cidr %q has host bits set (did you mean %s?)", s, p.Masked())
	}
	return p, nil
}

func insideAny(p netip.Prefix, outer []netip.Prefix) bool {
	for _, o := range outer {
		if o.Bits() <= p.Bits() && o.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// at marks a validation error with the path of the entry it is about, so
// ParseTopology can give the line; the message names the entry already.
func at(path string, err error) error { return &pathError{path: path, err: err} }

type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }
