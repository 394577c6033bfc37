package main

import (
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

func TestRestingPoolIsAFixedPointOfThePlanner(t *testing.T) {
	m5xl := ipam.Limits{MaxENIs: 8, IPv4PerENI: 30}
	base := ipam.DefaultPlanConfig()
	base.SubnetID = "subnet-a"
	tests := []struct {
		name string
		set  func(*ipam.PlanConfig)
		pods int
		// want is what the setting means, in addresses held at rest.
		want func(r rest) bool
	}{
		{"WARM_IP_TARGET keeps exactly that many idle", func(c *ipam.PlanConfig) { c.WarmIPTarget = 5 }, 10,
			func(r rest) bool { return r.addresses == 10+5 }},
		{"MINIMUM_IP_TARGET holds its floor with few pods", func(c *ipam.PlanConfig) { c.MinimumIPTarget, c.WarmIPTarget = 20, 2 }, 3,
			func(r rest) bool { return r.addresses == 20 }},
		{"WARM_ENI_TARGET keeps a whole ENI's addresses idle", func(*ipam.PlanConfig) {}, 40,
			func(r rest) bool { return r.addresses-40 >= 29 && r.addresses%29 == 0 }},
		{"prefixes keep one /28 entirely free", func(c *ipam.PlanConfig) { c.PrefixDelegation = true }, 20,
			func(r rest) bool { return r.addresses%16 == 0 && r.addresses-20 >= 16 && r.addresses-20 < 32 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.set(&cfg)
			r, err := restingPool(cfg, m5xl, tt.pods)
			if err != nil {
				t.Fatal(err)
			}
			if r.pods != tt.pods || !tt.want(r) {
				t.Errorf("at rest: %+v", r)
			}
			if r.calls == 0 {
				t.Error("a fresh node reached its target without an EC2 call")
			}
		})
	}
}

func TestRestingPoolStopsAtTheInstanceLimit(t *testing.T) {
	cfg := ipam.DefaultPlanConfig()
	cfg.SubnetID = "subnet-a"
	cfg.MaxPods = 1000 // let the ENI limit be what stops growth
	cfg.ENIGracePeriod = time.Minute
	r, err := restingPool(cfg, ipam.Limits{MaxENIs: 2, IPv4PerENI: 4}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if r.pods != 6 || r.addresses != 6 || r.enis != 2 || r.limit == "" {
		t.Errorf("2 ENIs × 3 addresses for 10 pods: %+v, want 6 pods placed and the limit named", r)
	}
}
