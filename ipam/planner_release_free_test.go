package ipam

import (
	"slices"
	"testing"
	"time"
)

// Issue 26, found by the scale driver's churn scenario: in
// WARM_ENI_TARGET mode only whole free ENIs go back, so a node whose pods
// landed on its higher device first (its lower attach had failed for want
// of subnet addresses) held 14 idle addresses on two partly used ENIs
// while pods on other nodes of the full subnet waited. With ReleaseFree
// (the agent's subnet-pressure mode) the free addresses beyond the
// targets go back too (all but the one address the planner always keeps
// available), cooling ones excepted; without it, nothing does.
func TestReleaseFreeGivesBackTheIdleAddressesOfPartlyUsedENIs(t *testing.T) {
	s := snap(0,
		eniAt(0, time.Hour, addrs(9, 9, 0)),
		eniAt(1, time.Hour, addrs(9, 2, 0)),
		eniAt(2, time.Hour, addrs(9, 6, 1)))
	noWarm := func(c *PlanConfig) { c.WarmENITarget = 0 }
	if acts, _ := Plan(s, testConfig(noWarm), m5large, t0); len(acts) != 0 {
		t.Errorf("WARM_ENI_TARGET mode without ReleaseFree: %v; want nothing (aws-node's behaviour)", brief(acts))
	}
	acts, _ := Plan(s, testConfig(noWarm, func(c *PlanConfig) { c.ReleaseFree = true }), m5large, t0)
	want := []string{"release eni-2 2", "release eni-1 6"}
	if got := brief(acts); !slices.Equal(got, want) {
		t.Errorf("with ReleaseFree: %v; want %v (the free addresses but one, never a cooling one)", got, want)
	}
}
