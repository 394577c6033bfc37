package executor

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
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
	sn := func(id, tag string, clusters ...string) cloud.Subnet {
		s := cloud.Subnet{ID: id, Tags: map[string]string{}}
		if tag != "-" {
			s.Tags[TagCNIRole] = tag
		}
		for _, c := range clusters {
			s.Tags[TagClusterPrefix+c] = "1"
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		cluster string
		subnets []cloud.Subnet
		want    []string
	}{
		{"node subnet untagged, others untagged", "", []cloud.Subnet{sn("a", "-"), sn("node", "-")}, []string{"node"}},
		{"tagged 1 kept in order", "", []cloud.Subnet{sn("big", "1"), sn("node", "-"), sn("small", "1")}, []string{"big", "node", "small"}},
		{"tagged 0 never", "", []cloud.Subnet{sn("off", "0"), sn("node", "0"), sn("on", "1")}, []string{"on"}},
		{"any value but 0 opts in", "", []cloud.Subnet{sn("yes", "true"), sn("node", "-")}, []string{"yes", "node"}},
		{"nothing eligible", "", []cloud.Subnet{sn("node", "0"), sn("a", "-")}, nil},
		// Issue 24: aws-node v1.22.1+'s per-cluster tag.
		{"another cluster's subnet is left to it", "blue", []cloud.Subnet{sn("green", "1", "green"), sn("node", "-")}, []string{"node"}},
		{"a subnet shared with this cluster is used", "blue", []cloud.Subnet{sn("shared", "1", "green", "blue"), sn("node", "-")}, []string{"shared", "node"}},
		{"a subnet with no cluster tag is anyone's", "blue", []cloud.Subnet{sn("any", "1"), sn("node", "-")}, []string{"any", "node"}},
		{"the node's subnet tagged 1 for another cluster is left too", "blue", []cloud.Subnet{sn("node", "1", "green"), sn("mine", "1", "blue")}, []string{"mine"}},
		// As aws-node: an untagged node subnet is used whatever cluster
		// tags it has, and without CLUSTER_NAME they are not looked at.
		{"the node's untagged subnet whatever its cluster tags", "blue", []cloud.Subnet{sn("node", "-", "green")}, []string{"node"}},
		{"without CLUSTER_NAME cluster tags are not looked at", "", []cloud.Subnet{sn("green", "1", "green"), sn("node", "-")}, []string{"green", "node"}},
		{"a cluster tag does not opt a subnet in", "blue", []cloud.Subnet{sn("bare", "-", "blue"), sn("node", "-")}, []string{"node"}},
	} {
		var got []string
		for _, s := range EligibleSubnets(tc.subnets, "node", tc.cluster) {
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

// subnetsCloud answers DescribeSubnets and SubnetsInZone from a list, or
// fails them; nothing else is called.
type subnetsCloud struct {
	Cloud
	subnets                  []cloud.Subnet
	describeFails, zoneFails bool
}

func (c *subnetsCloud) DescribeSubnets(_ context.Context, ids ...string) ([]cloud.Subnet, error) {
	if c.describeFails {
		return nil, &smithy.GenericAPIError{Code: "InternalError"}
	}
	var out []cloud.Subnet
	for _, s := range c.subnets {
		if slices.Contains(ids, s.ID) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (c *subnetsCloud) SubnetsInZone(context.Context, string, string) ([]cloud.Subnet, error) {
	if c.zoneFails {
		return nil, &smithy.GenericAPIError{Code: "InternalError"}
	}
	return c.subnets, nil
}

// Issue 24: which subnets a new ENI may try when EC2 cannot say, as
// aws-node decides (createENI's fallbacks, v1.23): without discovery the
// node's own; with it, nothing while the node's subnet cannot be
// described, and the node's own, if its tags allow, while only the
// zone's listing fails.
func TestCreateSubnetsWhenEC2CannotDescribeSubnets(t *testing.T) {
	node := func(tags map[string]string) cloud.Subnet {
		return cloud.Subnet{ID: "subnet-node", VPCID: "vpc-1", AvailabilityZone: "az-a", Tags: tags}
	}
	other := cloud.Subnet{ID: "subnet-other", Tags: map[string]string{TagCNIRole: "1"}}
	theirs := map[string]string{TagCNIRole: "1", TagClusterPrefix + "green": "1"}
	for _, tc := range []struct {
		name      string
		discovery bool
		c         subnetsCloud
		want      []string // nil: an error
	}{
		{"discovery off, node subnet unknown", false, subnetsCloud{describeFails: true}, []string{"subnet-node"}},
		{"discovery off, node subnet another cluster's", false, subnetsCloud{subnets: []cloud.Subnet{node(theirs)}}, nil},
		{"discovery off, node subnet untagged", false, subnetsCloud{subnets: []cloud.Subnet{node(nil), other}}, []string{"subnet-node"}},
		{"discovery on, node subnet unknown", true, subnetsCloud{describeFails: true}, nil},
		{"discovery on, zone unknown", true, subnetsCloud{subnets: []cloud.Subnet{node(nil)}, zoneFails: true}, []string{"subnet-node"}},
		{"discovery on, zone unknown, node subnet another cluster's", true, subnetsCloud{subnets: []cloud.Subnet{node(theirs)}, zoneFails: true}, nil},
		{"discovery on", true, subnetsCloud{subnets: []cloud.Subnet{other, node(theirs)}}, []string{"subnet-other"}},
	} {
		x := &Executor{Cloud: &tc.c, SubnetDiscovery: tc.discovery, ClusterName: "blue",
			Self: cloud.Self{Primary: cloud.Interface{SubnetID: "subnet-node"}}}
		got, err := x.createSubnets(context.Background(), ipam.Action{Kind: ipam.AttachENI, SubnetID: "subnet-node"}, nil)
		switch {
		case tc.want == nil && err == nil:
			t.Errorf("%s: subnets %v, want an error", tc.name, got)
		case tc.want != nil && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
