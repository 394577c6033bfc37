package sim

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

type describeInstancesResponse struct {
	RequestID    string           `xml:"requestId"`
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

var instanceFilterNames = []string{
	"instance-id", "instance-type", "instance-state-name", "instance-state-code",
	"subnet-id", "vpc-id", "availability-zone", "private-ip-address",
	"network-interface.network-interface-id", "network-interface.subnet-id",
	"network-interface.mac-address", "network-interface.addresses.private-ip-address",
}

func (c *Cloud) describeInstances(r *request) (any, error) {
	p := r.params
	ids := p.list("InstanceId")
	filters, err := p.filters(instanceFilterNames...)
	if err != nil {
		return nil, err
	}
	pg, err := p.paging(5, 1000, 0)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 && p.has("MaxResults") {
		return nil, errorf(codeInvalidParameterCombination, "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	resp := &describeInstancesResponse{RequestID: r.id}
	err = c.read(func(time.Time) error {
		set := c.instanceOrder
		if len(ids) > 0 {
			set = nil
			var missing []string
			for _, id := range ids {
				if in, ok := c.instances[id]; ok {
					set = append(set, in)
				} else {
					missing = append(missing, id)
				}
			}
			switch len(missing) {
			case 0:
			case 1:
				return errorf(codeInvalidInstanceNotFound, "The instance ID '%s' does not exist", missing[0])
			default:
				return errorf(codeInvalidInstanceNotFound, "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
			}
		}
		type item struct {
			in  *instance
			pos int
		}
		var matched []item
		for _, in := range set {
			if matches(filters, func(name string) []string { return c.instanceAttrLocked(in, name) }, in.tags) {
				matched = append(matched, item{in, slices.Index(c.instanceOrder, in)})
			}
		}
		page, next := paginate(matched, func(it item) int { return it.pos }, pg)
		for _, it := range page {
			resp.Reservations = append(resp.Reservations, xmlReservation{
				ReservationID: it.in.reservation,
				OwnerID:       c.accountID,
				Instances:     []xmlInstance{c.xmlInstanceLocked(it.in)},
			})
		}
		resp.NextToken = next
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *Cloud) instanceAttrLocked(in *instance, name string) []string {
	switch name {
	case "instance-id":
		return []string{in.id}
	case "instance-type":
		return []string{in.typ.name}
	case "instance-state-name":
		return []string{in.state}
	case "instance-state-code":
		return []string{strconv.Itoa(stateCode(in.state))}
	case "availability-zone":
		return []string{in.subnet.az}
	}
	if in.state != instanceRunning {
		return nil
	}
	switch name {
	case "subnet-id":
		return []string{in.subnet.id}
	case "vpc-id":
		return []string{c.vpcID}
	case "private-ip-address":
		return []string{in.primaryENI.primary.String()}
	}
	var out []string
	for _, e := range c.attachedENIsLocked(in) {
		switch name {
		case "network-interface.network-interface-id":
			out = append(out, e.id)
		case "network-interface.subnet-id":
			out = append(out, e.subnet.id)
		case "network-interface.mac-address":
			out = append(out, e.mac)
		case "network-interface.addresses.private-ip-address":
			for _, a := range e.addresses() {
				out = append(out, a.String())
			}
		}
	}
	return out
}

type terminateResponse struct {
	RequestID string           `xml:"requestId"`
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

type xmlStateChange struct {
	InstanceID    string           `xml:"instanceId"`
	CurrentState  xmlInstanceState `xml:"currentState"`
	PreviousState xmlInstanceState `xml:"previousState"`
}

// terminateInstances ends instances at once (EC2 passes through
// shutting-down; the emulator does not wait). Their ENIs detach; those
// with DeleteOnTermination are deleted, the rest stay available.
func (c *Cloud) terminateInstances(r *request) (any, error) {
	ids := r.params.list("InstanceId")
	if len(ids) == 0 {
		return nil, errorf(codeMissingParameter, "The request must contain the parameter InstanceId")
	}
	resp := &terminateResponse{RequestID: r.id}
	err := c.update(func(now time.Time) error {
		var set []*instance
		for _, id := range ids {
			in, err := c.instanceLocked(id)
			if err != nil {
				return err
			}
			set = append(set, in)
		}
		for _, in := range set {
			prev := in.state
			if in.state == instanceRunning {
				c.terminateLocked(in, now)
			}
			resp.Instances = append(resp.Instances, xmlStateChange{
				InstanceID:    in.id,
				CurrentState:  xmlInstanceState{Code: stateCode(in.state), Name: in.state},
				PreviousState: xmlInstanceState{Code: stateCode(prev), Name: prev},
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
