package main

import (
	"errors"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/config"
)

// An IPv6 node with a Kubernetes API and enforcement on stops before it
// starts a pod whose NetworkPolicies the IPv4-only policy tables could
// not enforce; with enforcement off, or no API (no policies), it runs.
func TestIPv6NodeRefusesToEnforceNetworkPolicyItCannot(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:1"}
	for _, tt := range []struct {
		name      string
		ipv6, pol bool
		rc        *rest.Config
		want      error
	}{
		{"IPv6 with enforcement", true, true, rc, errIPv6Policy},
		{"IPv6 with enforcement off", true, false, rc, nil},
		{"IPv6 without a Kubernetes API", true, true, nil, nil},
		{"IPv4 with enforcement", false, true, rc, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Config{IPv6: tt.ipv6, IPv4: !tt.ipv6, NetworkPolicy: tt.pol}
			_, err := policyOptions(cfg, tt.rc, nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("policyOptions = %v, want %v", err, tt.want)
			}
		})
	}
}
