package sim_test

import (
	"net/netip"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestAssignAndUnassignAddresses(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	id := e.cloud.Instances()[0].PrimaryENI // m5.large: 10 slots per ENI
	out, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), SecondaryPrivateIpAddressCount: aws.Int32(3)})
	if err != nil {
		t.Fatalf("AssignPrivateIpAddresses: %v", err)
	}
	if len(out.AssignedPrivateIpAddresses) != 3 || aws.ToString(out.NetworkInterfaceId) != id {
		t.Fatalf("assigned %+v on %s, want 3 addresses on %s", out.AssignedPrivateIpAddresses, aws.ToString(out.NetworkInterfaceId), id)
	}
	named, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), PrivateIpAddresses: []string{"10.0.0.200"}})
	if err != nil {
		t.Fatalf("assign a named address: %v", err)
	}
	if got := aws.ToString(named.AssignedPrivateIpAddresses[0].PrivateIpAddress); got != "10.0.0.200" {
		t.Errorf("assigned %s, want 10.0.0.200", got)
	}
	if n := len(e.describeENI(id).PrivateIpAddresses); n != 5 {
		t.Errorf("ENI holds %d addresses, want 5", n)
	}
	drop := []string{aws.ToString(out.AssignedPrivateIpAddresses[0].PrivateIpAddress), "10.0.0.200"}
	if _, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), PrivateIpAddresses: drop}); err != nil {
		t.Fatalf("UnassignPrivateIpAddresses: %v", err)
	}
	for _, a := range e.describeENI(id).PrivateIpAddresses {
		if ip := aws.ToString(a.PrivateIpAddress); ip == drop[0] || ip == drop[1] {
			t.Errorf("%s still assigned after unassign", ip)
		}
	}
}

func TestAssignErrors(t *testing.T) {
	tests := []struct {
		name     string
		instance string
		in       func(eni string) *ec2.AssignPrivateIpAddressesInput
		code     string
	}{
		{"per-ENI limit of the type", "i-node2", func(id string) *ec2.AssignPrivateIpAddressesInput {
			return &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), SecondaryPrivateIpAddressCount: aws.Int32(4)}
		}, "PrivateIpAddressLimitExceeded"},
		{"prefixes count against the same slots", "i-node2", func(id string) *ec2.AssignPrivateIpAddressesInput {
			return &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), Ipv4PrefixCount: aws.Int32(4)}
		}, "PrivateIpAddressLimitExceeded"},
		{"prefixes on a Xen instance", "i-xen", func(id string) *ec2.AssignPrivateIpAddressesInput {
			return &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), Ipv4PrefixCount: aws.Int32(1)}
		}, "InvalidParameterValue"},
		{"address held by another ENI", "i-node1", func(id string) *ec2.AssignPrivateIpAddressesInput {
			return &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), PrivateIpAddresses: []string{"10.0.0.5"}}
		}, "InvalidIPAddress.InUse"},
		{"addresses and prefixes together", "i-node1", func(id string) *ec2.AssignPrivateIpAddressesInput {
			return &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), SecondaryPrivateIpAddressCount: aws.Int32(1), Ipv4PrefixCount: aws.Int32(1)}
		}, "InvalidParameterCombination"},
		{"nothing to assign", "i-node1", func(id string) *ec2.AssignPrivateIpAddressesInput {
			return &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id)}
		}, "MissingParameter"},
		{"unknown ENI", "i-node1", func(string) *ec2.AssignPrivateIpAddressesInput {
			return &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String("eni-0000000000000dead"), SecondaryPrivateIpAddressCount: aws.Int32(1)}
		}, "InvalidNetworkInterfaceID.NotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, baseTopology, nil)
			var eni string
			for _, in := range e.cloud.Instances() {
				if in.ID == tt.instance {
					eni = in.PrimaryENI
				}
			}
			_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, tt.in(eni))
			wantCode(t, err, tt.code)
		})
	}
}

func TestUnassignErrors(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	in := e.cloud.Instances()[0]
	tests := []struct {
		name string
		in   *ec2.UnassignPrivateIpAddressesInput
		code string
	}{
		{"primary address", &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(in.PrimaryENI), PrivateIpAddresses: []string{in.PrivateIP.String()}}, "InvalidParameterValue"},
		{"address not on the ENI", &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(in.PrimaryENI), PrivateIpAddresses: []string{"10.0.0.99"}}, "InvalidParameterValue"},
		{"prefix not on the ENI", &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(in.PrimaryENI), Ipv4Prefixes: []string{"10.0.0.64/28"}}, "InvalidParameterValue"},
		{"nothing named", &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(in.PrimaryENI)}, "MissingParameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, tt.in)
			wantCode(t, err, tt.code)
		})
	}
}

func TestSubnetExhaustion(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	// A /28 has 16 addresses, 5 reserved: 11 to hand out.
	if got := e.freeAddresses("subnet-tiny"); got != 11 {
		t.Fatalf("fresh /28 has %d free addresses, want 11", got)
	}
	eni := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-tiny"), SecondaryPrivateIpAddressCount: aws.Int32(9)})
	if got := e.freeAddresses("subnet-tiny"); got != 1 {
		t.Fatalf("after taking 10, %d free, want 1", got)
	}
	_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(2)})
	wantCode(t, err, "InsufficientFreeAddressesInSubnet")
	if got := e.freeAddresses("subnet-tiny"); got != 1 {
		t.Errorf("a failed assign changed the free count to %d", got)
	}
	if _, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(1)}); err != nil {
		t.Fatalf("the last address: %v", err)
	}
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-tiny")})
	wantCode(t, err, "InsufficientFreeAddressesInSubnet")
	for _, a := range e.describeENI(aws.ToString(eni.NetworkInterfaceId)).PrivateIpAddresses {
		ip := netip.MustParseAddr(aws.ToString(a.PrivateIpAddress))
		if off := ip.As4()[3]; off < 4 || off == 15 {
			t.Errorf("handed out reserved address %s", ip)
		}
	}
}

func TestPrefixesAreAlignedAndFailWhenFragmented(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	id := e.cloud.Instances()[0].PrimaryENI
	out, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), Ipv4PrefixCount: aws.Int32(2)})
	if err != nil {
		t.Fatalf("assign 2 prefixes: %v", err)
	}
	for _, p := range out.AssignedIpv4Prefixes {
		q := netip.MustParsePrefix(aws.ToString(p.Ipv4Prefix))
		if q.Bits() != 28 || q.Masked() != q {
			t.Errorf("prefix %s is not an aligned /28", q)
		}
		if q.Contains(netip.MustParseAddr("10.0.0.4")) || q.Contains(netip.MustParseAddr("10.0.0.1")) {
			t.Errorf("prefix %s covers a used or reserved address", q)
		}
	}
	if got := e.describeENI(id).Ipv4Prefixes; len(got) != 2 {
		t.Errorf("ENI lists %d prefixes, want 2", len(got))
	}

	// Fragment subnet-b (/20: 256 blocks of 16) by holding one address in
	// every /28 block: thousands of addresses stay free, no /28 does.
	f := newEnv(t, baseTopology, nil)
	var addrs []string
	for block := range 256 {
		if block == 0 || block == 255 {
			continue // these hold reserved addresses already
		}
		addrs = append(addrs, netip.AddrFrom4([4]byte{10, 0, byte(16 + block/16), byte(block%16*16 + 5)}).String())
	}
	holder := aws.ToString(f.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b")}).NetworkInterfaceId)
	for len(addrs) > 0 {
		n := min(len(addrs), 40)
		extra := f.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b"), PrivateIpAddress: aws.String(addrs[0])})
		if n > 1 {
			if _, err := f.ec2.AssignPrivateIpAddresses(f.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: extra.NetworkInterfaceId, PrivateIpAddresses: addrs[1:n]}); err != nil {
				t.Fatalf("pin addresses: %v", err)
			}
		}
		addrs = addrs[n:]
	}
	if free := f.freeAddresses("subnet-b"); free < 3000 {
		t.Fatalf("only %d addresses free; the test meant to leave thousands", free)
	}
	_, err = f.ec2.AssignPrivateIpAddresses(f.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(holder), Ipv4PrefixCount: aws.Int32(1)})
	wantCode(t, err, "InsufficientCidrBlocks")
}

func TestAllowReassignmentMovesASecondaryAddress(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	from := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), PrivateIpAddresses: []types.PrivateIpAddressSpecification{{PrivateIpAddress: aws.String("10.0.0.50")}}})
	to := e.cloud.Instances()[0].PrimaryENI
	_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(to), PrivateIpAddresses: []string{"10.0.0.50"}})
	wantCode(t, err, "InvalidIPAddress.InUse")
	if _, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(to), PrivateIpAddresses: []string{"10.0.0.50"}, AllowReassignment: aws.Bool(true)}); err != nil {
		t.Fatalf("assign with AllowReassignment: %v", err)
	}
	for _, a := range e.describeENI(aws.ToString(from.NetworkInterfaceId)).PrivateIpAddresses {
		if aws.ToString(a.PrivateIpAddress) == "10.0.0.50" {
			t.Error("10.0.0.50 is still on the ENI it was moved from")
		}
	}
	moved := false
	for _, a := range e.describeENI(to).PrivateIpAddresses {
		moved = moved || aws.ToString(a.PrivateIpAddress) == "10.0.0.50"
	}
	if !moved {
		t.Error("10.0.0.50 is not on the ENI it was moved to")
	}
}
