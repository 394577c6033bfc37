package main

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/dataplane"
	"github.com/vpcnet/vpcnet/ipam"
)

// An IPv6 node enforces NetworkPolicy as an IPv4 one does (its Dataplane
// writes table ip6 vpcnet-policy): with a Kubernetes API and enforcement
// on, it watches the policies and writes the rules, where it once
// refused to start. With IPv4 egress on (aws-node's IPv6 default), where
// it refused too, its pods' IPv4 egress is judged by their egress
// policies at the veth vpcnet-egress-v4 makes for the attachment.
func TestIPv6NodeWithIPv4EgressStartsAndJudgesTheEgressVeths(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:1"}
	cfg := config.Config{IPv6: true, V4Egress: true, NetworkPolicy: true}
	o, err := policyOptions(t.Context(), cfg, rc, nil)
	if err != nil {
		t.Fatalf("policyOptions with ENABLE_IPv6, ENABLE_V4_EGRESS and enforcement on: %v", err)
	}
	if o.Source == nil {
		t.Fatalf("enforcement off (%q), want on", o.Off)
	}
	key := ipam.Key{Network: "vpcnet", ContainerID: "0123abcd", IfName: "eth0"}
	if o.EgressV4Veth == nil || o.EgressV4Veth(key) != dataplane.EgressV4VethName("vpcnet", "0123abcd", "eth0") {
		t.Errorf("the agent does not name the attachment's egress veth as vpcnet-egress-v4 does")
	}
	cfg.V4Egress = false
	if o, err := policyOptions(t.Context(), cfg, rc, nil); err != nil || o.EgressV4Veth != nil {
		t.Errorf("without IPv4 egress: %v, egress veths named: %v", err, o.EgressV4Veth != nil)
	}
}

func TestIPv6NodeEnforcesNetworkPolicy(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:1"}
	for _, tt := range []struct {
		name      string
		ipv6, pol bool
		rc        *rest.Config
		enforced  bool
	}{
		{"IPv6 with enforcement", true, true, rc, true},
		{"IPv6 with enforcement off", true, false, rc, false},
		{"IPv6 without a Kubernetes API", true, true, nil, false},
		{"IPv4 with enforcement", false, true, rc, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Config{IPv6: tt.ipv6, IPv4: !tt.ipv6, NetworkPolicy: tt.pol}
			o, err := policyOptions(t.Context(), cfg, tt.rc, nil)
			if err != nil {
				t.Fatalf("policyOptions: %v", err)
			}
			if got := o.Source != nil; got != tt.enforced {
				t.Errorf("enforced = %v (off: %q), want %v", got, o.Off, tt.enforced)
			}
		})
	}
}
