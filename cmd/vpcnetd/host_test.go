package main

import (
	"errors"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/config"
)

// An IPv6 node enforces NetworkPolicy as an IPv4 one does (its Dataplane
// writes table ip6 vpcnet-policy): with a Kubernetes API and enforcement
// on, it watches the policies and writes the rules, where it once
// refused to start.
// An IPv6 node whose pods also reach IPv4 through the node cannot judge
// that traffic, so it refuses to start rather than let it pass.
func TestIPv6NodeWithIPv4EgressRefusesToEnforceWhatItCannotJudge(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:1"}
	cfg := config.Config{IPv6: true, V4Egress: true, NetworkPolicy: true}
	if _, err := policyOptions(cfg, rc, nil); !errors.Is(err, errIPv6PolicyV4Egress) {
		t.Fatalf("policyOptions = %v, want errIPv6PolicyV4Egress", err)
	}
	cfg.NetworkPolicy = false
	if _, err := policyOptions(cfg, rc, nil); err != nil {
		t.Fatalf("with enforcement off: %v", err)
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
			o, err := policyOptions(cfg, tt.rc, nil)
			if err != nil {
				t.Fatalf("policyOptions: %v", err)
			}
			if got := o.Source != nil; got != tt.enforced {
				t.Errorf("enforced = %v (off: %q), want %v", got, o.Off, tt.enforced)
			}
		})
	}
}
