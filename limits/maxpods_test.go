package limits

import "testing"

// The expected values are EKS's (amazon-eks-ami max-pods-calculator.sh
// with --cni-prefix-delegation-enabled, and eni-max-pods.txt without).
func TestDefaultMaxPodsFollowsEKSRule(t *testing.T) {
	tests := []struct {
		instanceType string
		shape        PodShape
		addressable  int
		want         int
	}{
		// The case: 3 ENIs × 9 slots × 16 + 2 = 434, capped at 110.
		{"m5.large", PodShape{PrefixDelegation: true}, 434, 110},
		{"m5.large", PodShape{}, 29, 29},
		{"m5.large", PodShape{PrefixDelegation: true, CustomNetworking: true}, 290, 110},
		{"m5.large", PodShape{CustomNetworking: true}, 20, 20},
		{"m5.large", PodShape{PrefixDelegation: true, MaxENI: 1}, 146, 110},
		{"m5.large", PodShape{MaxENI: 2}, 20, 20},
		{"m5.large", PodShape{MaxENI: 7}, 29, 29},
		// 16 vCPUs: 110; 32 and 36: 250.
		{"m5.4xlarge", PodShape{PrefixDelegation: true}, 3714, 110},
		{"m5.8xlarge", PodShape{PrefixDelegation: true}, 3714, 250},
		{"c5.9xlarge", PodShape{PrefixDelegation: true}, 3714, 250},
		// Secondary addresses are not capped (eni-max-pods.txt: 737).
		{"m5.24xlarge", PodShape{}, 737, 737},
		{"m5.24xlarge", PodShape{PrefixDelegation: true}, 11762, 250},
		// Bare metal: prefixes work (Nitro), many vCPUs, except a1.metal.
		{"m5.metal", PodShape{PrefixDelegation: true}, 11762, 250},
		{"c7i.metal-24xl", PodShape{PrefixDelegation: true}, 11762, 250},
		{"a1.metal", PodShape{PrefixDelegation: true}, 3714, 110},
		{"hpc7a.12xlarge", PodShape{PrefixDelegation: true}, 1570, 110},
		// Below the ceiling the addressable count stands.
		{"t3.nano", PodShape{PrefixDelegation: true}, 34, 34},
		// Xen types get no prefixes: the secondary-address rule.
		{"m4.large", PodShape{PrefixDelegation: true}, 20, 20},
	}
	for _, tt := range tests {
		l, ok := Lookup(tt.instanceType)
		if !ok {
			t.Fatalf("%s not in the table", tt.instanceType)
		}
		if got := l.AddressablePods(tt.shape); got != tt.addressable {
			t.Errorf("%s %+v: AddressablePods = %d, want %d", tt.instanceType, tt.shape, got, tt.addressable)
		}
		if got := l.DefaultMaxPods(tt.shape); got != tt.want {
			t.Errorf("%s %+v: DefaultMaxPods = %d, want %d", tt.instanceType, tt.shape, got, tt.want)
		}
	}
}

func TestDefaultMaxPodsWithUnknownVCPUsUsesTheSmallCeiling(t *testing.T) {
	l := Limits{InstanceType: "x9.sim", MaxENIs: 8, IPv4PerENI: 30, Hypervisor: Nitro}
	if _, ok := l.PodCeiling(); ok {
		t.Fatal("x9.sim has a vCPU count")
	}
	if got := l.DefaultMaxPods(PodShape{PrefixDelegation: true}); got != 110 {
		t.Errorf("DefaultMaxPods = %d, want 110", got)
	}
}

func TestVCPUsFromTheSize(t *testing.T) {
	for name, want := range map[string]int{
		"t3.nano": 2, "m5.large": 2, "m5.xlarge": 4, "m5.2xlarge": 8, "c5.9xlarge": 36, "m5.24xlarge": 96,
		"c7i.metal-48xl": 192, "m5.metal": 64, "a1.metal": 16, "mac2-m2.metal": 12, "hpc7a.12xlarge": 24,
		"x9.sim": 0, "m5": 0, "m5.0xlarge": 0,
	} {
		if got := VCPUs(name); got != want {
			t.Errorf("VCPUs(%s) = %d, want %d", name, got, want)
		}
	}
}

// Every type in the table gets a vCPU count, so none falls back to the
// small ceiling by accident.
func TestEveryTableTypeHasVCPUs(t *testing.T) {
	for _, l := range table {
		if VCPUs(l.InstanceType) <= 0 {
			t.Errorf("%s: no vCPU count from its name", l.InstanceType)
		}
	}
}
