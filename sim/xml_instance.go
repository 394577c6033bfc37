package sim

type xmlInstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

// stateCode is EC2's numeric code for an instance state.
func stateCode(state string) int {
	switch state {
	case instanceTerminated:
		return 48
	default:
		return 16 // running
	}
}

type xmlPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	Tenancy          string `xml:"tenancy"`
}

type xmlInstanceAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlInstanceENI struct {
	NetworkInterfaceID string                `xml:"networkInterfaceId"`
	SubnetID           string                `xml:"subnetId"`
	VPCID              string                `xml:"vpcId"`
	Description        string                `xml:"description"`
	OwnerID            string                `xml:"ownerId"`
	Status             string                `xml:"status"`
	MACAddress         string                `xml:"macAddress"`
	PrivateIPAddress   string                `xml:"privateIpAddress"`
	PrivateDNSName     string                `xml:"privateDnsName"`
	SourceDestCheck    bool                  `xml:"sourceDestCheck"`
	InterfaceType      string                `xml:"interfaceType"`
	Groups             []xmlGroup            `xml:"groupSet>item"`
	Attachment         xmlInstanceAttachment `xml:"attachment"`
	PrivateIPs         []xmlPrivateIP        `xml:"privateIpAddressesSet>item"`
	Prefixes           []xmlPrefix           `xml:"ipv4PrefixSet>item"`
	IPv6Addresses      []xmlIPv6Address      `xml:"ipv6AddressesSet>item"`
	IPv6Prefixes       []xmlIPv6Prefix       `xml:"ipv6PrefixSet>item"`
	ConnTrack          *xmlConnTrack         `xml:"connectionTrackingConfiguration,omitempty"`
}

type xmlInstance struct {
	InstanceID         string           `xml:"instanceId"`
	ImageID            string           `xml:"imageId"`
	State              xmlInstanceState `xml:"instanceState"`
	PrivateDNSName     string           `xml:"privateDnsName"`
	InstanceType       string           `xml:"instanceType"`
	LaunchTime         string           `xml:"launchTime"`
	Placement          xmlPlacement     `xml:"placement"`
	SubnetID           string           `xml:"subnetId,omitempty"`
	VPCID              string           `xml:"vpcId,omitempty"`
	PrivateIPAddress   string           `xml:"privateIpAddress,omitempty"`
	SourceDestCheck    bool             `xml:"sourceDestCheck"`
	Groups             []xmlGroup       `xml:"groupSet>item"`
	Architecture       string           `xml:"architecture"`
	Hypervisor         string           `xml:"hypervisor"`
	VirtualizationType string           `xml:"virtualizationType"`
	Interfaces         []xmlInstanceENI `xml:"networkInterfaceSet>item"`
	Tags               []xmlTag         `xml:"tagSet>item"`
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

// xmlInstance renders in as DescribeInstances returns it, with every ENI
// attached to it (attaching and detaching ones included, as EC2 does).
func (c *Cloud) xmlInstanceLocked(in *instance) xmlInstance {
	hv := in.typ.hypervisor
	if hv != "xen" {
		hv = "nitro"
	}
	x := xmlInstance{
		InstanceID:         in.id,
		ImageID:            "ami-0000000000000sim",
		State:              xmlInstanceState{Code: stateCode(in.state), Name: in.state},
		InstanceType:       in.typ.name,
		LaunchTime:         ec2Time(in.launched),
		Placement:          xmlPlacement{AvailabilityZone: in.subnet.az, Tenancy: "default"},
		Architecture:       "x86_64",
		Hypervisor:         hv,
		VirtualizationType: "hvm",
		Tags:               xmlTags(in.tags),
	}
	if in.state != instanceRunning {
		// A terminated instance has no network left, as in EC2.
		return x
	}
	x.PrivateDNSName = c.privateDNS(in.primaryENI.primary.String())
	x.SubnetID, x.VPCID = in.subnet.id, c.vpcID
	x.PrivateIPAddress = in.primaryENI.primary.String()
	x.SourceDestCheck = in.primaryENI.sourceDestCheck
	x.Groups = xmlGroups(in.primaryENI.groups)
	for _, e := range c.attachedENIsLocked(in) {
		ipv6 := c.xmlENI(e) // the IPv6 sets are the same in both shapes
		x.Interfaces = append(x.Interfaces, xmlInstanceENI{
			NetworkInterfaceID: e.id,
			SubnetID:           e.subnet.id,
			VPCID:              c.vpcID,
			Description:        e.description,
			OwnerID:            c.accountID,
			Status:             e.status,
			MACAddress:         e.mac,
			PrivateIPAddress:   e.primaryString(),
			PrivateDNSName:     c.privateDNS(e.primaryString()),
			SourceDestCheck:    e.sourceDestCheck,
			InterfaceType:      e.interfaceType,
			Groups:             xmlGroups(e.groups),
			Attachment: xmlInstanceAttachment{
				AttachmentID:        e.att.id,
				DeviceIndex:         e.att.deviceIndex,
				NetworkCardIndex:    e.att.cardIndex,
				Status:              e.attachmentStatus(),
				AttachTime:          ec2Time(e.att.attachTime),
				DeleteOnTermination: e.att.deleteOnTermination,
			},
			PrivateIPs:    c.xmlPrivateIPs(e),
			Prefixes:      xmlPrefixes(e),
			IPv6Addresses: ipv6.IPv6Addresses,
			IPv6Prefixes:  ipv6.IPv6Prefixes,
			ConnTrack:     e.connTrack.xml(),
		})
	}
	return x
}
