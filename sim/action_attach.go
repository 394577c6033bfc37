package sim

import (
	"time"
)

type attachResponse struct {
	RequestID        string `xml:"requestId"`
	AttachmentID     string `xml:"attachmentId"`
	NetworkCardIndex int    `xml:"networkCardIndex"`
}

func (c *Cloud) attachNetworkInterface(r *request) (any, error) {
	p := r.params
	eniID, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	instanceID, err := p.required("InstanceId")
	if err != nil {
		return nil, err
	}
	device, ok, err := p.intOpt("DeviceIndex")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errorf(codeMissingParameter, "The request must contain the parameter DeviceIndex")
	}
	if device < 0 {
		return nil, errorf(codeInvalidParameterValue, "Value (%d) for parameter DeviceIndex is invalid.", device)
	}
	card, cardGiven, err := p.intOpt("NetworkCardIndex")
	if err != nil {
		return nil, err
	}
	resp := &attachResponse{RequestID: r.id}
	err = c.update(func(now time.Time) error {
		e, err := c.eniLocked(eniID)
		if err != nil {
			return err
		}
		in, err := c.instanceLocked(instanceID)
		if err != nil {
			return err
		}
		if in.state != instanceRunning {
			return errorf(codeIncorrectInstanceState, "The instance '%s' is not in a valid state for this operation.", in.id)
		}
		if e.att != nil {
			return errorf(codeInvalidENIInUse, "Interface: [%s] in use.", e.id)
		}
		if e.subnet.az != in.subnet.az {
			return errorf(codeInvalidParameterCombination, "You may not attach a network interface to an instance if they are not in the same availability zone (%s is in %s, %s in %s).", e.id, e.subnet.az, in.id, in.subnet.az)
		}
		if !cardGiven {
			card = in.typ.defaultCard
		}
		limit, ok := in.typ.cardMax(card)
		if !ok {
			return errorf(codeInvalidParameterValue, "Network card index %d is not valid for instance type %s, which has %d network card(s).", card, in.typ.name, len(in.typ.cards))
		}
		attached := c.attachedENIsLocked(in)
		onCard := 0
		for _, a := range attached {
			if a.att.cardIndex != card {
				continue
			}
			onCard++
			if a.att.deviceIndex == device {
				return errorf(codeInvalidParameterValue, "Instance '%s' already has an interface attached at device index '%d'.", in.id, device)
			}
		}
		if onCard >= limit {
			return errorf(codeAttachmentLimitExceeded, "Interface count %d exceeds the limit for %s (%d on network card %d).", onCard+1, in.typ.name, limit, card)
		}
		if e.slots() > in.typ.ipv4PerENI {
			return errorf(codePrivateIPLimitExceeded, "Network interface %s holds %d private addresses and prefixes; %s allows %d per interface.", e.id, e.slots(), in.typ.name, in.typ.ipv4PerENI)
		}
		if len(e.prefixes) > 0 && !in.typ.supportsPrefixes() {
			return errorf(codeInvalidParameterValue, "Network interface %s has IPv4 prefixes, which instance type %s does not support (Nitro only).", e.id, in.typ.name)
		}
		if e.ipv6Slots() > in.typ.ipv4PerENI {
			return errorf(codePrivateIPLimitExceeded, "Network interface %s holds %d IPv6 addresses and prefixes; %s allows %d per interface.", e.id, e.ipv6Slots(), in.typ.name, in.typ.ipv4PerENI)
		}
		if len(e.ipv6Prefixes) > 0 && !in.typ.supportsPrefixes() {
			return errorf(codeInvalidParameterValue, "Network interface %s has IPv6 prefixes, which instance type %s does not support (Nitro only).", e.id, in.typ.name)
		}
		att := &attachment{
			id:          c.ids.resource("eni-attach"),
			instance:    in,
			deviceIndex: device,
			cardIndex:   card,
			attachTime:  now,
		}
		c.beginAttachLocked(e, att, now)
		resp.AttachmentID, resp.NetworkCardIndex = att.id, card
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *Cloud) detachNetworkInterface(r *request) (any, error) {
	p := r.params
	attID, err := p.required("AttachmentId")
	if err != nil {
		return nil, err
	}
	// Force is accepted and changes nothing: the emulator's detach never
	// hangs, so there is nothing to force.
	if _, _, err := p.boolOpt("Force"); err != nil {
		return nil, err
	}
	err = c.update(func(now time.Time) error {
		e, ok := c.attachments[attID]
		if !ok {
			return errorf(codeInvalidAttachmentNotFound, "The attachment ID '%s' does not exist", attID)
		}
		switch {
		case e == e.att.instance.primaryENI:
			return errorf(codeOperationNotPermitted, "The network interface at device index 0 cannot be detached.")
		case e.status == statusAttaching:
			return errorf(codeIncorrectState, "Attachment '%s' is still attaching; detach it once it is attached.", attID)
		case e.status == statusDetaching:
			return errorf(codeIncorrectState, "Attachment '%s' is already detaching.", attID)
		}
		c.beginDetachLocked(e, now)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ok(r), nil
}

func (c *Cloud) modifyNetworkInterfaceAttribute(r *request) (any, error) {
	p := r.params
	id, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	groups := p.list("SecurityGroupId")
	ct, ctGiven, err := parseConnTrack(p)
	if err != nil {
		return nil, err
	}
	given := 0
	for _, set := range []bool{p.has("Description.Value"), len(groups) > 0, p.has("Attachment.AttachmentId") || p.has("Attachment.DeleteOnTermination"), p.has("SourceDestCheck.Value"), ctGiven} {
		if set {
			given++
		}
	}
	switch {
	case given == 0:
		return nil, errorf(codeMissingParameter, "The request must contain one attribute to modify: Description, SecurityGroupId.N, Attachment, SourceDestCheck or ConnectionTrackingSpecification")
	case given > 1:
		return nil, errorf(codeInvalidParameterCombination, "Fields for multiple attribute types specified: modify one attribute per request")
	}
	dot, dotGiven, err := p.boolOpt("Attachment.DeleteOnTermination")
	if err != nil {
		return nil, err
	}
	sdc, _, err := p.boolOpt("SourceDestCheck.Value")
	if err != nil {
		return nil, err
	}
	err = c.update(func(time.Time) error {
		e, err := c.eniLocked(id)
		if err != nil {
			return err
		}
		switch {
		case p.has("Description.Value"):
			e.description = p.get("Description.Value")
		case len(groups) > 0:
			if err := c.checkGroupsLocked(groups); err != nil {
				return err
			}
			e.groups = groups
		case p.has("SourceDestCheck.Value"):
			e.sourceDestCheck = sdc
		case ctGiven:
			e.connTrack = e.connTrack.merge(ct)
		default:
			attID, err := p.required("Attachment.AttachmentId")
			if err != nil {
				return err
			}
			if !dotGiven {
				return errorf(codeMissingParameter, "The request must contain the parameter Attachment.DeleteOnTermination")
			}
			if e.att == nil || e.att.id != attID {
				return errorf(codeInvalidAttachmentNotFound, "The attachment ID '%s' does not exist for network interface %s", attID, id)
			}
			e.att.deleteOnTermination = dot
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ok(r), nil
}

func (c *Cloud) instanceLocked(id string) (*instance, error) {
	in, ok := c.instances[id]
	if !ok {
		return nil, errorf(codeInvalidInstanceNotFound, "The instance ID '%s' does not exist", id)
	}
	return in, nil
}
