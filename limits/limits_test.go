package limits

import (
	"bytes"
	"os"
	"testing"

	"github.com/vpcnet/vpcnet/limits/internal/gen"
)

func TestTableIsUpToDateWithCSV(t *testing.T) {
	src, err := os.ReadFile("instance-types.csv")
	if err != nil {
		t.Fatal(err)
	}
	want, err := gen.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("table.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("table.go is out of date with instance-types.csv; run `go generate ./limits`")
	}
}

func TestLookupKnownTypes(t *testing.T) {
	tests := []struct {
		instanceType string
		maxENIs      int
		ipv4PerENI   int
		maxPods      int
		hypervisor   Hypervisor
		bareMetal    bool
		prefixes     bool
	}{
		{"m5.large", 3, 10, 29, Nitro, false, true},
		{"t3.medium", 3, 6, 17, Nitro, false, true},
		{"m5.4xlarge", 8, 30, 234, Nitro, false, true},
		{"c4.large", 3, 10, 29, Xen, false, false},
		{"a1.metal", 8, 30, 234, UnknownHypervisor, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.instanceType, func(t *testing.T) {
			l, ok := Lookup(tt.instanceType)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tt.instanceType)
			}
			if l.InstanceType != tt.instanceType || l.MaxENIs != tt.maxENIs || l.IPv4PerENI != tt.ipv4PerENI ||
				l.Hypervisor != tt.hypervisor || l.BareMetal != tt.bareMetal {
				t.Errorf("Lookup(%q) = %+v, want %d ENIs × %d IPv4, %s, bare metal %t",
					tt.instanceType, l, tt.maxENIs, tt.ipv4PerENI, tt.hypervisor, tt.bareMetal)
			}
			if got := MaxPods(l); got != tt.maxPods {
				t.Errorf("MaxPods(%s) = %d, want %d", tt.instanceType, got, tt.maxPods)
			}
			if got := l.SupportsPrefixDelegation(); got != tt.prefixes {
				t.Errorf("%s SupportsPrefixDelegation() = %t, want %t", tt.instanceType, got, tt.prefixes)
			}
		})
	}
}

func TestLookupUnknownTypeReportsFalse(t *testing.T) {
	for _, name := range []string{"", "m5", "m5.large ", "M5.LARGE", "zz9.plural", "a0.large"} {
		if l, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) = %+v, true; want false so the caller asks EC2", name, l)
		}
	}
}

func TestLookupFindsEveryTableEntry(t *testing.T) {
	if Len() != 1391 {
		t.Errorf("Len() = %d, want the 1391 types of instance-types.csv", Len())
	}
	for _, want := range table {
		got, ok := Lookup(want.InstanceType)
		if !ok || got.InstanceType != want.InstanceType {
			t.Fatalf("Lookup(%q) = %q, %t", want.InstanceType, got.InstanceType, ok)
		}
	}
}

func TestLookupReturnsMultipleCards(t *testing.T) {
	l, ok := Lookup("p5.48xlarge")
	if !ok {
		t.Fatal("p5.48xlarge not found")
	}
	if len(l.Cards) != 32 || l.Cards[0] != (Card{0, 2}) || l.Cards[31] != (Card{31, 2}) {
		t.Errorf("p5.48xlarge cards = %v, want 32 cards of 2 ENIs", l.Cards)
	}
}

func TestLookupResultCannotChangeTheTable(t *testing.T) {
	l, _ := Lookup("m5.large")
	l.Cards[0].MaxENIs = 99
	again, _ := Lookup("m5.large")
	if again.Cards[0].MaxENIs != 3 {
		t.Errorf("changing a returned card changed the table: m5.large card 0 now has %d ENIs", again.Cards[0].MaxENIs)
	}
}

func TestMaxPodsOfEmptyLimitsIsZero(t *testing.T) {
	for _, l := range []Limits{{}, {MaxENIs: 3, IPv4PerENI: 1}, {MaxENIs: 0, IPv4PerENI: 10}} {
		if got := MaxPods(l); got != 0 {
			t.Errorf("MaxPods(%+v) = %d, want 0", l, got)
		}
	}
}
