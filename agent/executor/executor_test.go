package executor

import (
	"slices"
	"testing"

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
