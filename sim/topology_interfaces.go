package sim

import (
	"fmt"
	"net/netip"
	"time"
)

// validateInterfaces checks the interfaces an instance is launched with:
// a type EC2 has, a network card the instance type has, a device index
// free on that card (card 0 device 0 is the primary ENI's), no more
// interfaces on a card than it takes, a subnet in the instance's zone.
func (in InstanceSpec) validateInterfaces(t *Topology, i int) error {
	typ, _ := lookupType(in.Type, t.InstanceTypes) // checked by the caller
	zone := map[string]string{}
	for _, s := range t.Subnets {
		zone[s.ID] = s.AZ
	}
	taken := map[[2]int]bool{{typ.defaultCard, 0}: true}
	onCard := map[int]int{typ.defaultCard: 1}
	for j, spec := range in.Interfaces {
		path := fmt.Sprintf("instances[%d].interfaces[%d]", i, j)
		fail := func(format string, args ...any) error {
			return at(path, fmt.Errorf("instance %s: interfaces[%d]: %s", in.ID, j, fmt.Sprintf(format, args...)))
		}
		switch spec.Type {
		case "", interfaceNormal, interfaceEFA, interfaceEFAOnly, interfaceTrunk:
		default:
			return fail("type %q: want interface, efa, efa-only or trunk", spec.Type)
		}
		limit, ok := typ.cardMax(spec.NetworkCard)
		if !ok {
			return fail("networkCard %d: instance type %s has %d network card(s)", spec.NetworkCard, typ.name, len(typ.cards))
		}
		if spec.DeviceIndex < 0 {
			return fail("deviceIndex %d must not be negative", spec.DeviceIndex)
		}
		slot := [2]int{spec.NetworkCard, spec.DeviceIndex}
		if taken[slot] {
			return fail("network card %d device index %d is already taken (card %d device 0 is the primary ENI's)", spec.NetworkCard, spec.DeviceIndex, typ.defaultCard)
		}
		taken[slot] = true
		onCard[spec.NetworkCard]++
		if onCard[spec.NetworkCard] > limit {
			return fail("network card %d takes %d interfaces on %s", spec.NetworkCard, limit, typ.name)
		}
		sn := spec.Subnet
		if sn == "" {
			sn = in.Subnet
		}
		az, ok := zone[sn]
		if !ok {
			return fail("subnet %q is not defined in subnets", sn)
		}
		if az != zone[in.Subnet] {
			return fail("subnet %s is in %s, the instance in %s", sn, az, zone[in.Subnet])
		}
		if spec.SecondaryAddresses < 0 || spec.SecondaryAddresses+1 > typ.ipv4PerENI {
			return fail("secondaryAddresses %d: %s takes 0 to %d per interface", spec.SecondaryAddresses, typ.name, typ.ipv4PerENI-1)
		}
		if spec.Type == interfaceEFAOnly && spec.SecondaryAddresses > 0 {
			return fail("an efa-only interface has no IP addresses")
		}
	}
	return nil
}

// attachAtLaunchLocked creates and attaches, in use at once, the
// interfaces an instance is launched with besides its primary ENI.
func (c *Cloud) attachAtLaunchLocked(in *instance, specs []InterfaceSpec, groups []string, now time.Time) error {
	for j, spec := range specs {
		sn := in.subnet
		if spec.Subnet != "" {
			sn = c.subnets[spec.Subnet]
		}
		itype := spec.Type
		if itype == "" {
			itype = interfaceNormal
		}
		var primary netip.Addr
		var secondaries []netip.Addr
		if itype != interfaceEFAOnly {
			addrs, ok := sn.pool.takeAny(1 + spec.SecondaryAddresses)
			if !ok {
				return fmt.Errorf("interfaces[%d]: subnet %s (%s) has not %d free addresses", j, sn.id, sn.cidr, 1+spec.SecondaryAddresses)
			}
			primary, secondaries = addrs[0], addrs[1:]
		}
		e := c.newENILocked(sn, primary, groups, fmt.Sprintf("%s interface %d of %s", itype, j, in.id))
		e.interfaceType, e.secondaries, e.tags = itype, secondaries, cloneTags(spec.Tags)
		if itype != interfaceEFAOnly {
			e.ipv6s = assignOnCreation(sn)
		}
		e.status = statusInUse
		e.att = &attachment{
			id:                  c.ids.resource("eni-attach"),
			instance:            in,
			deviceIndex:         spec.DeviceIndex,
			cardIndex:           spec.NetworkCard,
			deleteOnTermination: true,
			attachTime:          now,
		}
		c.attachments[e.att.id] = e
	}
	return nil
}
