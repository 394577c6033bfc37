package sim

import (
	"slices"

	"github.com/vpcnet/vpcnet/limits"
)

// maxSlotsUnattached caps the address slots of an ENI that is attached to
// nothing: EC2 checks an ENI against its instance's type at attach time, so
// before that only the largest type's limit (50) applies.
const maxSlotsUnattached = 50

// typeInfo is what the emulator needs to know about an instance type.
type typeInfo struct {
	name        string
	maxENIs     int // on the default network card
	ipv4PerENI  int // address slots per ENI, primary included
	hypervisor  string
	bareMetal   bool
	defaultCard int
	cards       []limits.Card
}

// lookupType finds an instance type, first among the topology's own
// definitions (so a topology can also shrink a known type for a test),
// then in the generated limits table.
func lookupType(name string, custom []InstanceTypeSpec) (typeInfo, bool) {
	for _, c := range custom {
		if c.Name == name {
			hv := c.Hypervisor
			if hv == "" {
				hv = "nitro"
			}
			cards := []limits.Card{{Index: 0, MaxENIs: c.MaxENIs}}
			for i, n := range c.NetworkCards[min(1, len(c.NetworkCards)):] {
				cards = append(cards, limits.Card{Index: i + 1, MaxENIs: n})
			}
			return typeInfo{
				name:       c.Name,
				maxENIs:    c.MaxENIs,
				ipv4PerENI: c.IPv4PerENI,
				hypervisor: hv,
				cards:      cards,
			}, true
		}
	}
	l, ok := limits.Lookup(name)
	if !ok {
		return typeInfo{}, false
	}
	cards := l.Cards
	if len(cards) == 0 {
		cards = []limits.Card{{Index: l.DefaultCard, MaxENIs: l.MaxENIs}}
	}
	return typeInfo{
		name:        l.InstanceType,
		maxENIs:     l.MaxENIs,
		ipv4PerENI:  l.IPv4PerENI,
		hypervisor:  string(l.Hypervisor),
		bareMetal:   l.BareMetal,
		defaultCard: l.DefaultCard,
		cards:       cards,
	}, true
}

// supportsPrefixes mirrors limits.Limits.SupportsPrefixDelegation: EC2
// hands out /28 prefixes on Nitro instances only.
func (t typeInfo) supportsPrefixes() bool {
	return t.hypervisor == string(limits.Nitro) || t.bareMetal
}

// cardMax is the number of ENIs network card idx can attach.
func (t typeInfo) cardMax(idx int) (int, bool) {
	i := slices.IndexFunc(t.cards, func(c limits.Card) bool { return c.Index == idx })
	if i < 0 {
		return 0, false
	}
	return t.cards[i].MaxENIs, true
}

// totalENIs is the instance's ENI limit over all its network cards, which
// is what DescribeInstanceTypes reports as MaximumNetworkInterfaces.
func (t typeInfo) totalENIs() int {
	n := 0
	for _, c := range t.cards {
		n += c.MaxENIs
	}
	return n
}
