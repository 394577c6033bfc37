// Package limits knows the EC2 networking limits of every instance type:
// how many ENIs an instance can attach and how many IPv4 addresses each ENI
// can hold. The table is generated from instance-types.csv, so a node never
// depends on a cloud call to learn its own shape; an unknown type reports
// false and the caller asks EC2 DescribeInstanceTypes instead.
package limits

import (
	"slices"
	"strings"
)

//go:generate go run gen.go

// Hypervisor is the virtualisation system of an instance type, as EC2
// DescribeInstanceTypes reports it.
type Hypervisor string

const (
	Nitro Hypervisor = "nitro"
	Xen   Hypervisor = "xen"
	// UnknownHypervisor is what EC2 reports for bare metal types, which
	// run on no hypervisor.
	UnknownHypervisor Hypervisor = "unknown"
)

// Card is one network card of an instance type and the number of ENIs it
// can attach.
type Card struct {
	Index   int
	MaxENIs int
}

// Limits are the networking limits of one instance type.
type Limits struct {
	InstanceType string
	// MaxENIs is the number of ENIs the default network card can attach,
	// the primary ENI included.
	MaxENIs int
	// IPv4PerENI is the number of private IPv4 addresses one ENI can hold,
	// its own primary address included. With prefix delegation each
	// secondary slot holds a /28 instead of one address.
	IPv4PerENI  int
	Hypervisor  Hypervisor
	BareMetal   bool
	DefaultCard int
	Cards       []Card
}

// Lookup returns the limits of instanceType ("m5.large"). It reports false
// for a type the table does not know, for example one launched after the
// table was generated; callers then fall back to DescribeInstanceTypes.
func Lookup(instanceType string) (Limits, bool) {
	i, ok := slices.BinarySearchFunc(table[:], instanceType, func(l Limits, t string) int {
		return strings.Compare(l.InstanceType, t)
	})
	if !ok {
		return Limits{}, false
	}
	l := table[i]
	// The table is shared; the caller gets its own cards.
	l.Cards = slices.Clone(l.Cards)
	return l, true
}

// Len is the number of instance types in the table.
func Len() int { return len(table) }

// MaxPods is the number of pods a node of this type can run when every pod
// gets a secondary address: each ENI gives up its primary address, and two
// host-network pods (kube-proxy, the agent itself) need none. It is the
// Amazon VPC CNI's formula, so kubelet's --max-pods stays the same after a
// switch.
func MaxPods(l Limits) int {
	if l.MaxENIs <= 0 || l.IPv4PerENI <= 1 {
		return 0
	}
	return l.MaxENIs*(l.IPv4PerENI-1) + 2
}

// SupportsPrefixDelegation reports whether ENIs of this type can be given
// /28 prefixes. EC2 offers prefixes on Nitro instances only; bare metal
// instances are built on the Nitro system though EC2 names no hypervisor.
func (l Limits) SupportsPrefixDelegation() bool {
	return l.Hypervisor == Nitro || l.BareMetal
}
