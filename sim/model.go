package sim

import (
	"maps"
	"net/netip"
	"slices"
	"time"
)

// ENI states as EC2 reports them in NetworkInterface.Status.
const (
	statusAvailable = "available"
	statusAttaching = "attaching"
	statusInUse     = "in-use"
	statusDetaching = "detaching"
)

// Instance states as EC2 reports them (name and code).
const (
	instanceRunning    = "running"
	instanceTerminated = "terminated"
)

type subnet struct {
	id   string
	az   string
	cidr netip.Prefix
	tags map[string]string
	pool *pool
	// ipv6 is the subnet's IPv6 /64, nil while it has none (IPv4-only).
	ipv6 *subnetIPv6
	// ipv6Native marks an IPv6-only subnet. EC2 gives its ENIs no IPv4
	// address; the emulator still gives each a primary IPv4 from cidr,
	// because the fabric and the agent's host plumbing key ENIs by it.
	ipv6Native bool
	// assignIPv6OnCreation gives every ENI created in the subnet one IPv6
	// address unless the request says Ipv6AddressCount=0.
	assignIPv6OnCreation bool
}

// subnetIPv6 is a subnet's IPv6 CIDR block association.
type subnetIPv6 struct {
	assocID string
	cidr    netip.Prefix
	pool    *pool6
}

// vpcIPv6 is one of the VPC's IPv6 CIDR block associations.
type vpcIPv6 struct {
	assocID string
	cidr    netip.Prefix
}

type instance struct {
	id          string
	typ         typeInfo
	subnet      *subnet
	groups      []string
	tags        map[string]string
	state       string
	launched    time.Time
	reservation string
	primaryENI  *eni
	imds        imdsHistory
}

type eni struct {
	id          string
	seq         int
	subnet      *subnet
	description string
	mac         string
	primary     netip.Addr
	secondaries []netip.Addr
	prefixes    []netip.Prefix
	// ipv6s and ipv6Prefixes are the ENI's IPv6 addresses and /80
	// prefixes, from its subnet's /64.
	ipv6s           []netip.Addr
	ipv6Prefixes    []netip.Prefix
	groups          []string
	tags            map[string]string
	status          string
	att             *attachment // nil while available
	sourceDestCheck bool
	// interfaceType is EC2's InterfaceType: "interface" (an ordinary
	// ENI), "efa", "efa-only" (no IP address at all) or "trunk".
	interfaceType string
	// connTrack is the ENI's connection-tracking idle timeouts.
	connTrack connTrack
}

type attachment struct {
	id                  string
	instance            *instance
	deviceIndex         int
	cardIndex           int
	deleteOnTermination bool
	attachTime          time.Time
	// due is when the pending attach or detach completes; zero once
	// attached.
	due time.Time
}

// attachmentStatus maps the ENI's state to the attachment's own words.
func (e *eni) attachmentStatus() string {
	switch e.status {
	case statusAttaching:
		return "attaching"
	case statusDetaching:
		return "detaching"
	default:
		return "attached"
	}
}

// slots is how many of the ENI's per-type address slots are used: the
// primary address, each secondary address, and each /28 prefix.
func (e *eni) slots() int { return len(e.addresses()) + len(e.prefixes) }

// addresses lists the primary address first, then the secondaries. An
// efa-only interface has none.
func (e *eni) addresses() []netip.Addr {
	if !e.primary.IsValid() {
		return slices.Clone(e.secondaries)
	}
	return append([]netip.Addr{e.primary}, e.secondaries...)
}

// primaryString is the primary address as EC2 writes it, "" for an
// interface without one (efa-only).
func (e *eni) primaryString() string {
	if !e.primary.IsValid() {
		return ""
	}
	return e.primary.String()
}

// slotLimit is the most slots the ENI may use where it is now: its
// instance type's limit when attached, the largest type's otherwise.
func (e *eni) slotLimit() int {
	if e.att != nil {
		return e.att.instance.typ.ipv4PerENI
	}
	return maxSlotsUnattached
}

// ipv6Slots is how many of the ENI's IPv6 slots are used: EC2 allows
// as many IPv6 addresses per interface as IPv4 addresses, and counts each
// /80 prefix as one of them.
func (e *eni) ipv6Slots() int { return len(e.ipv6s) + len(e.ipv6Prefixes) }

func (e *eni) hasAddress(a netip.Addr) bool {
	return a == e.primary || slices.Contains(e.secondaries, a)
}

// attachedENIs lists the ENIs attached to (or attaching to, or detaching
// from) inst, by network card and device index.
func (c *Cloud) attachedENIsLocked(inst *instance) []*eni {
	var out []*eni
	for _, e := range c.enis {
		if e.att != nil && e.att.instance == inst {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *eni) int {
		if a.att.cardIndex != b.att.cardIndex {
			return a.att.cardIndex - b.att.cardIndex
		}
		return a.att.deviceIndex - b.att.deviceIndex
	})
	return out
}

// enisInOrder lists every ENI in creation order.
func (c *Cloud) enisInOrderLocked() []*eni {
	out := slices.Collect(maps.Values(c.enis))
	slices.SortFunc(out, func(a, b *eni) int { return a.seq - b.seq })
	return out
}

func cloneTags(t map[string]string) map[string]string {
	out := make(map[string]string, len(t))
	maps.Copy(out, t)
	return out
}
