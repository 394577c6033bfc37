package sim

import (
	"slices"
	"strconv"
	"strings"
)

type xmlNetworkCard struct {
	NetworkCardIndex         int `xml:"networkCardIndex"`
	MaximumNetworkInterfaces int `xml:"maximumNetworkInterfaces"`
}

type xmlNetworkInfo struct {
	MaximumNetworkInterfaces  int              `xml:"maximumNetworkInterfaces"`
	Ipv4AddressesPerInterface int              `xml:"ipv4AddressesPerInterface"`
	Ipv6AddressesPerInterface int              `xml:"ipv6AddressesPerInterface"`
	Ipv6Supported             bool             `xml:"ipv6Supported"`
	MaximumNetworkCards       int              `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex   int              `xml:"defaultNetworkCardIndex"`
	NetworkCards              []xmlNetworkCard `xml:"networkCards>item"`
	EnaSupport                string           `xml:"enaSupport"`
}

type xmlInstanceType struct {
	InstanceType      string         `xml:"instanceType"`
	CurrentGeneration bool           `xml:"currentGeneration"`
	BareMetal         bool           `xml:"bareMetal"`
	Hypervisor        string         `xml:"hypervisor,omitempty"`
	NetworkInfo       xmlNetworkInfo `xml:"networkInfo"`
}

type describeInstanceTypesResponse struct {
	RequestID     string            `xml:"requestId"`
	InstanceTypes []xmlInstanceType `xml:"instanceTypeSet>item"`
	NextToken     string            `xml:"nextToken,omitempty"`
}

// describeInstanceTypes answers for named types from the topology's
// instanceTypes and the limits table. Without InstanceType.N it lists the
// topology's own types and the types of its instances: the limits package
// offers lookup, not enumeration, of its 1,400 types.
func (c *Cloud) describeInstanceTypes(r *request) (any, error) {
	p := r.params
	names := p.list("InstanceType")
	filters, err := p.filters("instance-type", "hypervisor", "bare-metal", "network-info.maximum-network-interfaces", "network-info.ipv4-addresses-per-interface")
	if err != nil {
		return nil, err
	}
	pg, err := p.paging(5, 100, 0)
	if err != nil {
		return nil, err
	}
	var types []typeInfo
	var missing []string
	if len(names) == 0 {
		c.mu.Lock()
		for _, in := range c.instanceOrder {
			names = append(names, in.typ.name)
		}
		c.mu.Unlock()
		for _, t := range c.customTypes {
			names = append(names, t.Name)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	for _, n := range names {
		t, ok := lookupType(n, c.customTypes)
		if !ok {
			missing = append(missing, n)
			continue
		}
		types = append(types, t)
	}
	if len(missing) > 0 {
		return nil, errorf(codeInvalidInstanceType, "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
	}
	type item struct {
		t   typeInfo
		pos int
	}
	var matched []item
	for i, t := range types {
		if matches(filters, func(name string) []string { return typeAttr(t, name) }, nil) {
			matched = append(matched, item{t, i})
		}
	}
	page, next := paginate(matched, func(it item) int { return it.pos }, pg)
	resp := &describeInstanceTypesResponse{RequestID: r.id, NextToken: next}
	for _, it := range page {
		resp.InstanceTypes = append(resp.InstanceTypes, xmlType(it.t))
	}
	return resp, nil
}

func typeAttr(t typeInfo, name string) []string {
	switch name {
	case "instance-type":
		return []string{t.name}
	case "hypervisor":
		return []string{t.hypervisor}
	case "bare-metal":
		return []string{strconv.FormatBool(t.bareMetal)}
	case "network-info.maximum-network-interfaces":
		return []string{strconv.Itoa(t.totalENIs())}
	case "network-info.ipv4-addresses-per-interface":
		return []string{strconv.Itoa(t.ipv4PerENI)}
	}
	return nil
}

func xmlType(t typeInfo) xmlInstanceType {
	x := xmlInstanceType{
		InstanceType:      t.name,
		CurrentGeneration: true,
		BareMetal:         t.bareMetal,
		NetworkInfo: xmlNetworkInfo{
			MaximumNetworkInterfaces:  t.totalENIs(),
			Ipv4AddressesPerInterface: t.ipv4PerENI,
			Ipv6AddressesPerInterface: t.ipv4PerENI,
			Ipv6Supported:             true,
			MaximumNetworkCards:       len(t.cards),
			DefaultNetworkCardIndex:   t.defaultCard,
			EnaSupport:                "supported",
		},
	}
	if t.hypervisor == "nitro" || t.hypervisor == "xen" {
		x.Hypervisor = t.hypervisor
	}
	for _, card := range t.cards {
		x.NetworkInfo.NetworkCards = append(x.NetworkInfo.NetworkCards, xmlNetworkCard{NetworkCardIndex: card.Index, MaximumNetworkInterfaces: card.MaxENIs})
	}
	return x
}
