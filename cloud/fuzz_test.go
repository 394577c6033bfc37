package cloud

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/vpcnet/vpcnet/netfacts"
)

// mapIMDS answers from md, a missing path as IMDS's 404 does.
func mapIMDS(md map[string]string) imdsGetter {
	return func(_ context.Context, path string) (string, error) {
		v, ok := md[path]
		if !ok {
			return "", fmt.Errorf("IMDS %s: %w", path, errIMDSNotFound)
		}
		return strings.TrimSpace(v), nil
	}
}

// FuzzReadSelf feeds fuzzed IMDS answers for the fields vpcnet parses
// (the instance MAC, the MAC list, the primary ENI's device number,
// subnet, addresses, prefixes and VPC CIDRs, an identifier) to what
// DescribeSelf does with them. It must never panic, and what it accepts
// must be what the agent can use: IPv4 only, /28 prefixes, device numbers
// with a route table, MACs that are MACs.
func FuzzReadSelf(f *testing.F) {
	f.Add(primaryMAC, primaryMAC+"/\n"+secondMAC+"/", "0", "10.0.0.0/24", "10.0.0.10\n10.0.0.11", "10.0.0.32/28", "10.0.0.0/16\n100.64.0.0/16", "i-node1")
	f.Add("../../x", "../../x/", "-1", "fd00::/64", "fe80::1%eth0", "10.0.0.0/24", "", "i-1 x")
	f.Add(primaryMAC, primaryMAC+"/\n"+primaryMAC+"/", "252", "10.0.0.0/8", "::ffff:10.0.0.1", "10.0.0.7/28", "0.0.0.0/0", "")
	f.Add(strings.ToUpper(primaryMAC), primaryMAC, "+1", "10.0.0.7/24", "0.0.0.0", "fd00::/28", "10.0.0.0/33", "\x00")
	f.Fuzz(func(t *testing.T, mac, macs, dev, subnet, ips, prefixes, vpc, id string) {
		md := nodeMetadata()
		base := "network/interfaces/macs/" + mac + "/"
		md["mac"] = mac
		md["network/interfaces/macs/"] = macs
		md["instance-id"] = id
		for k, v := range map[string]string{
			"device-number": dev, "subnet-ipv4-cidr-block": subnet, "local-ipv4s": ips,
			"ipv4-prefix": prefixes, "vpc-ipv4-cidr-blocks": vpc,
			"interface-id": "eni-fuzz", "subnet-id": "subnet-a", "security-group-ids": "sg-1",
		} {
			md[base+k] = v
		}
		s, err := readSelf(context.Background(), mapIMDS(md), slog.New(slog.DiscardHandler))
		if err != nil {
			return
		}
		if err := checkToken(s.InstanceID); err != nil {
			t.Errorf("instance id: %v", err)
		}
		if len(s.VPCCIDRs) == 0 || !s.Primary.PrimaryIP().Is4() {
			t.Errorf("accepted a node with VPC CIDRs %v and primary address %v", s.VPCCIDRs, s.Primary.PrimaryIP())
		}
		if len(s.Interfaces) > maxIMDSInterfaces {
			t.Errorf("accepted %d interfaces", len(s.Interfaces))
		}
		for _, p := range s.VPCCIDRs {
			checkPrefix(t, "VPC CIDR", p, minSubnetBits, maxSubnetBits)
		}
		for _, ifc := range s.Interfaces {
			checkInterface(t, ifc)
		}
	})
}

func checkInterface(t *testing.T, ifc Interface) {
	t.Helper()
	if _, err := parseMAC(ifc.MAC); err != nil {
		t.Errorf("interface MAC: %v", err)
	}
	if ifc.DeviceNumber < 0 || ifc.DeviceNumber > netfacts.MaxDeviceIndex {
		t.Errorf("interface %s: device number %d", ifc.MAC, ifc.DeviceNumber)
	}
	checkPrefix(t, "subnet", ifc.SubnetCIDR, minSubnetBits, maxSubnetBits)
	for _, a := range ifc.IPv4s {
		checkAddr(t, a)
	}
	for _, p := range ifc.Prefixes {
		checkPrefix(t, "delegated prefix", p, prefixBits, prefixBits)
	}
}

func checkAddr(t *testing.T, a netip.Addr) {
	t.Helper()
	if !a.Is4() || a.IsUnspecified() || a.Zone() != "" {
		t.Errorf("accepted address %v", a)
	}
}

func checkPrefix(t *testing.T, what string, p netip.Prefix, minBits, maxBits int) {
	t.Helper()
	if !p.Addr().Is4() || p.Bits() < minBits || p.Bits() > maxBits || p != p.Masked() {
		t.Errorf("accepted %s %v", what, p)
	}
}

// FuzzFromEC2 feeds fuzzed SDK structs (what the SDK decodes from EC2's
// XML) through the mappers to vpcnet types: eniFromEC2 and
// subnetFromEC2. They must never panic and must refuse any address,
// prefix, MAC or device index vpcnet cannot use.
func FuzzFromEC2(f *testing.F) {
	f.Add("eni-1", "0a:00:00:00:00:01", "10.0.0.10", "10.0.0.11", "10.0.0.32/28", int32(1), "10.0.0.0/24")
	f.Add("", "", "", "", "", int32(0), "")
	f.Add("eni-2", "0A:00:00:00:00:0G", "fd00::1", "::ffff:10.0.0.1", "10.0.0.0/16", int32(-1), "fd00::/64")
	f.Add("eni-3", "0a:00:00:00:00:01", "0.0.0.0", "fe80::1%eth0", "10.0.0.7/28", int32(252), "10.0.0.0/8")
	f.Fuzz(func(t *testing.T, id, mac, primary, secondary, prefix string, dev int32, cidr string) {
		ni := types.NetworkInterface{
			NetworkInterfaceId: aws.String(id),
			MacAddress:         aws.String(mac),
			PrivateIpAddress:   aws.String(primary),
			Attachment:         &types.NetworkInterfaceAttachment{DeviceIndex: aws.Int32(dev)},
			PrivateIpAddresses: []types.NetworkInterfacePrivateIpAddress{
				{PrivateIpAddress: aws.String(primary), Primary: aws.Bool(true)},
				{PrivateIpAddress: aws.String(secondary)},
			},
			Ipv4Prefixes: []types.Ipv4PrefixSpecification{{Ipv4Prefix: aws.String(prefix)}},
		}
		if e, err := eniFromEC2(ni); err == nil {
			if e.MAC != "" {
				if _, err := parseMAC(e.MAC); err != nil {
					t.Errorf("MAC: %v", err)
				}
			}
			if d := e.Attachment.DeviceIndex; d < 0 || d > netfacts.MaxDeviceIndex {
				t.Errorf("device index %d", d)
			}
			checkAddr(t, e.PrimaryIP)
			for _, a := range e.SecondaryIPs {
				checkAddr(t, a)
			}
			for _, p := range e.Prefixes {
				checkPrefix(t, "delegated prefix", p, prefixBits, prefixBits)
			}
		} else if !strings.HasPrefix(err.Error(), "ENI ") || len(err.Error()) > 1000 {
			t.Errorf("error does not name the ENI or is unbounded: %.200s", err)
		}
		if sn, err := subnetFromEC2(types.Subnet{SubnetId: aws.String(id), CidrBlock: aws.String(cidr)}); err == nil {
			checkPrefix(t, "subnet", sn.CIDR, minSubnetBits, maxSubnetBits)
		}
	})
}
