package executor

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/cloud"
)

func TestUnmanagedReason(t *testing.T) {
	at := func(card int) *cloud.Attachment { return &cloud.Attachment{NetworkCardIndex: card} }
	for _, tc := range []struct {
		name string
		eni  cloud.ENI
		want string
	}{
		{"ordinary ENI", cloud.ENI{InterfaceType: "interface", Attachment: at(0)}, ""},
		{"type not reported", cloud.ENI{Attachment: at(0)}, ""},
		{"no_manage", cloud.ENI{InterfaceType: "interface", Attachment: at(0), Tags: map[string]string{TagNoManage: "true"}}, "tagged " + TagNoManage + "=true"},
		{"no_manage false", cloud.ENI{Attachment: at(0), Tags: map[string]string{TagNoManage: "false"}}, ""},
		{"trunk", cloud.ENI{InterfaceType: "trunk", Attachment: at(0)}, "interface type trunk"},
		{"efa", cloud.ENI{InterfaceType: "efa", Attachment: at(0)}, "interface type efa"},
		{"efa-only", cloud.ENI{InterfaceType: "efa-only", Attachment: at(2)}, "interface type efa-only"},
		{"ordinary ENI on card 1", cloud.ENI{InterfaceType: "interface", Attachment: at(1)}, "on network card 1"},
	} {
		if got := UnmanagedReason(tc.eni); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestEligibleSubnets(t *testing.T) {
	sn := func(id, tag string) cloud.Subnet {
		s := cloud.Subnet{ID: id, Tags: map[string]string{}}
		if tag != "-" {
			s.Tags[TagCNIRole] = tag
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		subnets []cloud.Subnet
		want    []string
	}{
		{"node subnet untagged, others untagged", []cloud.Subnet{sn("a", "-"), sn("node", "-")}, []string{"node"}},
		{"tagged 1 kept in order", []cloud.Subnet{sn("big", "1"), sn("node", "-"), sn("small", "1")}, []string{"big", "node", "small"}},
		{"tagged 0 never", []cloud.Subnet{sn("off", "0"), sn("node", "0"), sn("on", "1")}, []string{"on"}},
		{"any value but 0 opts in", []cloud.Subnet{sn("yes", "true"), sn("node", "-")}, []string{"yes", "node"}},
		{"nothing eligible", []cloud.Subnet{sn("node", "0"), sn("a", "-")}, nil},
	} {
		var got []string
		for _, s := range EligibleSubnets(tc.subnets, "node") {
			got = append(got, s.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// fragmentedCloud refuses prefixes in the subnets it names, as EC2 does
// with InsufficientCidrBlocks; only CreateENI is called.
type fragmentedCloud struct {
	Cloud
	fragmented map[string]bool
	tried      []string
}

func (c *fragmentedCloud) CreateENI(_ context.Context, in cloud.CreateENIInput) (cloud.ENI, error) {
	c.tried = append(c.tried, in.SubnetID)
	if c.fragmented[in.SubnetID] {
		return cloud.ENI{}, &smithy.GenericAPIError{Code: "InsufficientCidrBlocks", Message: "no /28 in " + in.SubnetID}
	}
	return cloud.ENI{ID: "eni-new", SubnetID: in.SubnetID}, nil
}

// A new ENI passes from a subnet without room to the next; when every
// subnet refuses, the last refusal is the error, so the machine sees
// subnet_fragmented.
func TestCreateENITriesTheNextSubnet(t *testing.T) {
	c := &fragmentedCloud{fragmented: map[string]bool{"subnet-node": true}}
	x := &Executor{Cloud: c}
	eni, subnet, err := createENI(context.Background(), x.Cloud, cloud.CreateENIInput{Prefixes: 1}, []string{"subnet-node", "subnet-cni", "subnet-other"})
	if err != nil || subnet != "subnet-cni" || eni.SubnetID != "subnet-cni" {
		t.Fatalf("created %+v in %s (err %v), want it in subnet-cni", eni, subnet, err)
	}
	if !slices.Equal(c.tried, []string{"subnet-node", "subnet-cni"}) {
		t.Errorf("tried %v", c.tried)
	}
	c = &fragmentedCloud{fragmented: map[string]bool{"subnet-node": true, "subnet-cni": true}}
	x.Cloud = c
	_, subnet, err = createENI(context.Background(), x.Cloud, cloud.CreateENIInput{Prefixes: 1}, []string{"subnet-node", "subnet-cni"})
	if !Classify(err).SubnetFragmented || subnet != "subnet-cni" {
		t.Errorf("all fragmented: subnet %s, err %v; want subnet_fragmented from subnet-cni", subnet, err)
	}
}
