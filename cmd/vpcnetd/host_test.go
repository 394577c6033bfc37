package main

import (
	"context"
	"errors"
	"testing"

	"github.com/vpcnet/vpcnet/agent"
)

// An IPv6 node stops at host set-up, before the agent asks EC2 for a
// prefix, while the pods' IPv6 wiring does not exist: the dataplane (nil
// here) is never touched.
func TestHostSetupRefusesIPv6UntilPodsAreWired(t *testing.T) {
	err := host{}.Setup(context.Background(), agent.NodeNet{IPv6: true, PrimaryMAC: "02:00:00:00:00:01"})
	if !errors.Is(err, errNoIPv6Dataplane) {
		t.Fatalf("Setup = %v, want errNoIPv6Dataplane", err)
	}
}
