package sim

import (
	"strconv"
	"time"
)

type describeENIsResponse struct {
	RequestID  string   `xml:"requestId"`
	Interfaces []xmlENI `xml:"networkInterfaceSet>item"`
	NextToken  string   `xml:"nextToken,omitempty"`
}

// eniFilterNames are the DescribeNetworkInterfaces filters the emulator knows,
// besides the tag filters every Describe takes.
var eniFilterNames = []string{
	"network-interface-id", "subnet-id", "vpc-id", "status", "availability-zone",
	"mac-address", "description", "owner-id", "interface-type", "group-id",
	"private-ip-address", "addresses.private-ip-address", "ipv4-prefix", "ipv6-addresses.ipv6-address",
	"attachment.instance-id", "attachment.attachment-id", "attachment.status",
	"attachment.device-index", "attachment.network-card-index", "attachment.delete-on-termination",
}

func (c *Cloud) describeNetworkInterfaces(r *request) (any, error) {
	p := r.params
	ids := p.list("NetworkInterfaceId")
	filters, err := p.filters(eniFilterNames...)
	if err != nil {
		return nil, err
	}
	pg, err := p.paging(5, 1000, 0)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 && p.has("MaxResults") {
		return nil, errorf(codeInvalidParameterCombination, "The parameter NetworkInterfaceIds cannot be used with the parameter MaxResults")
	}
	resp := &describeENIsResponse{RequestID: r.id}
	err = c.read(func(time.Time) error {
		var set []*eni
		if len(ids) > 0 {
			for _, id := range ids {
				e, err := c.eniLocked(id)
				if err != nil {
					return err
				}
				set = append(set, e)
			}
		} else {
			set = c.enisInOrderLocked()
		}
		var matched []*eni
		for _, e := range set {
			if matches(filters, func(name string) []string { return c.eniAttr(e, name) }, e.tags) {
				matched = append(matched, e)
			}
		}
		page, next := paginate(matched, func(e *eni) int { return e.seq }, pg)
		for _, e := range page {
			resp.Interfaces = append(resp.Interfaces, c.xmlENI(e))
		}
		resp.NextToken = next
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// eniAttr returns e's values for a filter name.
func (c *Cloud) eniAttr(e *eni, name string) []string {
	switch name {
	case "network-interface-id":
		return []string{e.id}
	case "subnet-id":
		return []string{e.subnet.id}
	case "vpc-id":
		return []string{c.vpcID}
	case "status":
		return []string{e.status}
	case "availability-zone":
		return []string{e.subnet.az}
	case "mac-address":
		return []string{e.mac}
	case "description":
		return []string{e.description}
	case "owner-id":
		return []string{c.accountID}
	case "interface-type":
		return []string{e.interfaceType}
	case "group-id":
		return e.groups
	case "private-ip-address", "addresses.private-ip-address":
		var out []string
		for _, a := range e.addresses() {
			out = append(out, a.String())
		}
		return out
	case "ipv6-addresses.ipv6-address":
		var out []string
		for _, a := range e.ipv6s {
			out = append(out, a.String())
		}
		return out
	case "ipv4-prefix":
		var out []string
		for _, q := range e.prefixes {
			out = append(out, q.String())
		}
		return out
	}
	if e.att == nil {
		return nil
	}
	switch name {
	case "attachment.instance-id":
		return []string{e.att.instance.id}
	case "attachment.attachment-id":
		return []string{e.att.id}
	case "attachment.status":
		return []string{e.attachmentStatus()}
	case "attachment.device-index":
		return []string{strconv.Itoa(e.att.deviceIndex)}
	case "attachment.network-card-index":
		return []string{strconv.Itoa(e.att.cardIndex)}
	case "attachment.delete-on-termination":
		return []string{strconv.FormatBool(e.att.deleteOnTermination)}
	}
	return nil
}
