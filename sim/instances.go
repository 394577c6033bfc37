package sim

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// InstanceInfo describes one instance for code that drives the emulator,
// such as a network fabric wiring a namespace per node.
type InstanceInfo struct {
	ID         string
	Type       string
	SubnetID   string
	AZ         string
	PrimaryENI string
	MAC        string // of the primary ENI
	PrivateIP  netip.Addr
	State      string // running or terminated
}

// InterfaceInfo describes one ENI attached to an instance.
type InterfaceInfo struct {
	ID               string
	MAC              string
	DeviceIndex      int
	NetworkCardIndex int
	// InterfaceType is EC2's: interface, efa, efa-only or trunk.
	InterfaceType string
	Status        string // attaching, in-use or detaching
	SubnetID      string
	SubnetCIDR    netip.Prefix
	Addresses     []netip.Addr // primary first
	Prefixes      []netip.Prefix
	// SubnetIPv6CIDR is invalid for an IPv4-only subnet.
	SubnetIPv6CIDR netip.Prefix
	IPv6Addresses  []netip.Addr
	IPv6Prefixes   []netip.Prefix
}

// assignOnCreation is the IPv6 address a subnet that assigns one on
// creation gives a new ENI, or none.
func assignOnCreation(sn *subnet) []netip.Addr {
	if !sn.assignIPv6OnCreation {
		return nil
	}
	return sn.ipv6.pool.takeAny(1)
}

// Instances lists every instance in topology order.
func (c *Cloud) Instances() []InstanceInfo {
	var out []InstanceInfo
	c.read(func(time.Time) error {
		for _, in := range c.instanceOrder {
			out = append(out, InstanceInfo{
				ID:         in.id,
				Type:       in.typ.name,
				SubnetID:   in.subnet.id,
				AZ:         in.subnet.az,
				PrimaryENI: in.primaryENI.id,
				MAC:        in.primaryENI.mac,
				PrivateIP:  in.primaryENI.primary,
				State:      in.state,
			})
		}
		return nil
	})
	return out
}

// Interfaces lists the ENIs attached to an instance, by network card and
// device index, as EC2 sees them now (IMDS may lag behind).
func (c *Cloud) Interfaces(instanceID string) ([]InterfaceInfo, error) {
	var out []InterfaceInfo
	err := c.read(func(time.Time) error {
		in, ok := c.instances[instanceID]
		if !ok {
			return fmt.Errorf("interfaces: instance %s does not exist", instanceID)
		}
		for _, e := range c.attachedENIsLocked(in) {
			info := InterfaceInfo{
				ID:               e.id,
				MAC:              e.mac,
				DeviceIndex:      e.att.deviceIndex,
				NetworkCardIndex: e.att.cardIndex,
				InterfaceType:    e.interfaceType,
				Status:           e.status,
				SubnetID:         e.subnet.id,
				SubnetCIDR:       e.subnet.cidr,
				Addresses:        e.addresses(),
				Prefixes:         slices.Clone(e.prefixes),
				IPv6Addresses:    slices.Clone(e.ipv6s),
				IPv6Prefixes:     slices.Clone(e.ipv6Prefixes),
			}
			if e.subnet.ipv6 != nil {
				info.SubnetIPv6CIDR = e.subnet.ipv6.cidr
			}
			out = append(out, info)
		}
		return nil
	})
	return out, err
}

// launch starts an instance from the topology with its primary ENI
// attached at device index 0, deleted when the instance terminates.
func (c *Cloud) launch(spec InstanceSpec, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	typ, _ := lookupType(spec.Type, c.customTypes) // validated
	sn := c.subnets[spec.Subnet]
	groups := spec.SecurityGroups
	if len(groups) == 0 {
		groups = []string{c.groups[0]}
	}
	var primary netip.Addr
	if spec.PrivateIP != "" {
		a, _ := netip.ParseAddr(spec.PrivateIP) // validated
		if !sn.pool.isFree(a) {
			return fmt.Errorf("privateIp %s is not a free address of subnet %s (%s); the first four and the last address are reserved", a, sn.id, sn.cidr)
		}
		sn.pool.take(a)
		primary = a
	} else {
		addrs, ok := sn.pool.takeAny(1)
		if !ok {
			return fmt.Errorf("subnet %s (%s) has no free address left", sn.id, sn.cidr)
		}
		primary = addrs[0]
	}
	in := &instance{
		id:          spec.ID,
		typ:         typ,
		subnet:      sn,
		groups:      slices.Clone(groups),
		tags:        cloneTags(spec.Tags),
		state:       instanceRunning,
		launched:    now,
		reservation: c.ids.resource("r"),
	}
	e := c.newENILocked(sn, primary, groups, "Primary network interface")
	e.connTrack = spec.ConnectionTracking.connTrack()
	e.ipv6s = assignOnCreation(sn)
	e.status = statusInUse
	e.att = &attachment{
		id:                  c.ids.resource("eni-attach"),
		instance:            in,
		deviceIndex:         0,
		cardIndex:           typ.defaultCard,
		deleteOnTermination: true,
		attachTime:          now,
	}
	c.attachments[e.att.id] = e
	in.primaryENI = e
	if err := c.attachAtLaunchLocked(in, spec.Interfaces, groups, now); err != nil {
		return err
	}
	c.instances[in.id] = in
	c.instanceOrder = append(c.instanceOrder, in)
	return nil
}

// newENILocked registers an available ENI holding primary, which the
// caller has already taken from the subnet's pool.
func (c *Cloud) newENILocked(sn *subnet, primary netip.Addr, groups []string, description string) *eni {
	c.seq++
	e := &eni{
		id:              c.ids.resource("eni"),
		seq:             c.seq,
		subnet:          sn,
		description:     description,
		mac:             c.ids.mac(),
		primary:         primary,
		groups:          slices.Clone(groups),
		tags:            map[string]string{},
		status:          statusAvailable,
		interfaceType:   "interface",
		sourceDestCheck: true,
	}
	c.enis[e.id] = e
	return e
}

// terminateLocked stops an instance the way EC2 does: every ENI is
// detached at once; those marked DeleteOnTermination are deleted and give
// their addresses back, the others stay behind as available ENIs (the
// leaked-ENI case the agent's collector exists for).
func (c *Cloud) terminateLocked(in *instance, now time.Time) {
	for _, e := range c.attachedENIsLocked(in) {
		dot := e.att.deleteOnTermination
		c.finishDetachLocked(e, now)
		if dot {
			c.deleteENILocked(e)
		}
	}
	in.state = instanceTerminated
}

// deleteENILocked removes an available ENI and frees its addresses.
func (c *Cloud) deleteENILocked(e *eni) {
	for _, a := range e.addresses() {
		e.subnet.pool.release(a)
	}
	for _, p := range e.prefixes {
		e.subnet.pool.releasePrefix(p)
	}
	// An ENI's IPv6 addresses come from the subnet's /64, which a subnet
	// keeps once associated, so the pool is there to take them back.
	for _, a := range e.ipv6s {
		e.subnet.ipv6.pool.release(a)
	}
	for _, q := range e.ipv6Prefixes {
		e.subnet.ipv6.pool.releasePrefix(q)
	}
	delete(c.enis, e.id)
}

// VPCCIDRs are the VPC's address ranges.
func (c *Cloud) VPCCIDRs() []netip.Prefix { return slices.Clone(c.vpcCIDRs) }

// FreePrefixes is how many aligned /28 blocks of the subnet are entirely
// free: exactly the prefixes EC2 could still delegate there, counted
// from the addresses taken (the five AWS reserves included, so the first
// and last /28 never are).
func (c *Cloud) FreePrefixes(subnetID string) (int, error) {
	var n int
	err := c.update(func(time.Time) error {
		sn, ok := c.subnets[subnetID]
		if !ok {
			return fmt.Errorf("free prefixes: subnet %s does not exist", subnetID)
		}
		n = sn.pool.freePrefixes()
		return nil
	})
	return n, err
}
