package sim

import (
	"time"
)

// The XML shapes below use the element names the aws-sdk-go-v2 EC2
// deserializers look for (service/ec2 deserializers.go); lists are
// "<xSet><item>" as in every EC2 Query response.

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlPrivateIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName"`
	Primary          bool   `xml:"primary"`
}

type xmlPrefix struct {
	IPv4Prefix string `xml:"ipv4Prefix"`
}

type xmlIPv6Address struct {
	IPv6Address   string `xml:"ipv6Address"`
	IsPrimaryIPv6 bool   `xml:"isPrimaryIpv6"`
}

type xmlIPv6Prefix struct {
	IPv6Prefix string `xml:"ipv6Prefix"`
}

type xmlENIAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId,omitempty"`
	InstanceOwnerID     string `xml:"instanceOwnerId,omitempty"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlENI struct {
	NetworkInterfaceID string            `xml:"networkInterfaceId"`
	SubnetID           string            `xml:"subnetId"`
	VPCID              string            `xml:"vpcId"`
	AvailabilityZone   string            `xml:"availabilityZone,omitempty"`
	Description        string            `xml:"description"`
	OwnerID            string            `xml:"ownerId"`
	RequesterManaged   bool              `xml:"requesterManaged"`
	Status             string            `xml:"status"`
	MACAddress         string            `xml:"macAddress"`
	PrivateIPAddress   string            `xml:"privateIpAddress"`
	PrivateDNSName     string            `xml:"privateDnsName"`
	SourceDestCheck    bool              `xml:"sourceDestCheck"`
	InterfaceType      string            `xml:"interfaceType"`
	Groups             []xmlGroup        `xml:"groupSet>item"`
	Attachment         *xmlENIAttachment `xml:"attachment,omitempty"`
	PrivateIPs         []xmlPrivateIP    `xml:"privateIpAddressesSet>item"`
	Prefixes           []xmlPrefix       `xml:"ipv4PrefixSet>item"`
	IPv6Addresses      []xmlIPv6Address  `xml:"ipv6AddressesSet>item"`
	IPv6Prefixes       []xmlIPv6Prefix   `xml:"ipv6PrefixSet>item"`
	IPv6Native         bool              `xml:"ipv6Native"`
	Tags               []xmlTag          `xml:"tagSet>item"`
	ConnTrack          *xmlConnTrack     `xml:"connectionTrackingConfiguration,omitempty"`
}

// ec2Time is the timestamp format of EC2 responses.
func ec2Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func xmlTags(tags map[string]string) []xmlTag {
	var out []xmlTag
	for _, k := range sortedKeys(tags) {
		out = append(out, xmlTag{Key: k, Value: tags[k]})
	}
	return out
}

func xmlGroups(ids []string) []xmlGroup {
	var out []xmlGroup
	for _, id := range ids {
		out = append(out, xmlGroup{GroupID: id, GroupName: id})
	}
	return out
}

// privateDNS is the name EC2 gives an address in a Region other than
// us-east-1.
func (c *Cloud) privateDNS(a string) string {
	if a == "" {
		return ""
	}
	return "ip-" + dashed(a) + "." + c.region + ".compute.internal"
}

func dashed(a string) string {
	b := []byte(a)
	for i := range b {
		if b[i] == '.' {
			b[i] = '-'
		}
	}
	return string(b)
}

func (c *Cloud) xmlPrivateIPs(e *eni) []xmlPrivateIP {
	var out []xmlPrivateIP
	for i, a := range e.addresses() {
		out = append(out, xmlPrivateIP{PrivateIPAddress: a.String(), PrivateDNSName: c.privateDNS(a.String()), Primary: i == 0})
	}
	return out
}

func xmlPrefixes(e *eni) []xmlPrefix {
	var out []xmlPrefix
	for _, p := range e.prefixes {
		out = append(out, xmlPrefix{IPv4Prefix: p.String()})
	}
	return out
}

// xmlENI renders e as DescribeNetworkInterfaces and CreateNetworkInterface
// return it.
func (c *Cloud) xmlENI(e *eni) xmlENI {
	x := xmlENI{
		NetworkInterfaceID: e.id,
		SubnetID:           e.subnet.id,
		VPCID:              c.vpcID,
		AvailabilityZone:   e.subnet.az,
		Description:        e.description,
		OwnerID:            c.accountID,
		Status:             e.status,
		MACAddress:         e.mac,
		PrivateIPAddress:   e.primaryString(),
		PrivateDNSName:     c.privateDNS(e.primaryString()),
		SourceDestCheck:    e.sourceDestCheck,
		InterfaceType:      e.interfaceType,
		Groups:             xmlGroups(e.groups),
		PrivateIPs:         c.xmlPrivateIPs(e),
		Prefixes:           xmlPrefixes(e),
		Tags:               xmlTags(e.tags),
		ConnTrack:          e.connTrack.xml(),
		IPv6Native:         e.subnet.ipv6Native,
	}
	// No address is the ENI's primary IPv6 (EnablePrimaryIpv6 is not
	// emulated), so, as in EC2, the ENI has no ipv6Address of its own.
	for _, a := range e.ipv6s {
		x.IPv6Addresses = append(x.IPv6Addresses, xmlIPv6Address{IPv6Address: a.String()})
	}
	for _, q := range e.ipv6Prefixes {
		x.IPv6Prefixes = append(x.IPv6Prefixes, xmlIPv6Prefix{IPv6Prefix: q.String()})
	}
	if e.att != nil {
		x.Attachment = &xmlENIAttachment{
			AttachmentID:        e.att.id,
			InstanceID:          e.att.instance.id,
			InstanceOwnerID:     c.accountID,
			DeviceIndex:         e.att.deviceIndex,
			NetworkCardIndex:    e.att.cardIndex,
			Status:              e.attachmentStatus(),
			AttachTime:          ec2Time(e.att.attachTime),
			DeleteOnTermination: e.att.deleteOnTermination,
		}
	}
	return x
}
