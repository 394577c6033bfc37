package limits

import (
	"slices"
	"strconv"
	"strings"
)

// The max-pods ceilings of EKS's rule (amazon-eks-ami
// max-pods-calculator.sh): however many addresses the ENIs hold, a node
// with at most 30 vCPUs is recommended no more than 110 pods, a larger one
// no more than 250.
const (
	podCeilingSmall = 110
	podCeilingLarge = 250
	ceilingVCPUs    = 30
)

// PodShape is what max pods depends on beyond the instance type.
type PodShape struct {
	// PrefixDelegation: each secondary slot of an ENI holds a /28 (16
	// addresses) instead of one address.
	PrefixDelegation bool
	// CustomNetworking: pods use secondary ENIs only.
	CustomNetworking bool
	// MaxENI is MAX_ENI; 0 or less means the instance type's limit.
	MaxENI int
}

// podENIs is how many ENIs can carry pod addresses.
func (l Limits) podENIs(s PodShape) int {
	n := l.MaxENIs
	if s.MaxENI > 0 && s.MaxENI < n {
		n = s.MaxENI
	}
	if s.CustomNetworking {
		n--
	}
	return max(n, 0)
}

// AddressablePods is the most pods the node can give addresses to: every
// pod ENI's secondary slots, each one address or a /28, plus two
// host-network pods (kube-proxy, the agent) that need none. Prefix
// delegation counts only where EC2 offers it (SupportsPrefixDelegation).
// It is EKS's rule before its ceiling (max-pods-calculator.sh
// --show-max-allowed).
func (l Limits) AddressablePods(s PodShape) int {
	if l.IPv4PerENI <= 1 {
		return 0
	}
	perSlot := 1
	if s.PrefixDelegation && l.SupportsPrefixDelegation() {
		perSlot = 16
	}
	return l.podENIs(s)*(l.IPv4PerENI-1)*perSlot + 2
}

// PodCeiling is EKS's recommended most pods for the type: 110, or 250
// above 30 vCPUs. ok is false when the vCPU count is unknown.
func (l Limits) PodCeiling() (ceiling int, ok bool) {
	vcpus := VCPUs(l.InstanceType)
	switch {
	case vcpus <= 0:
		return 0, false
	case vcpus > ceilingVCPUs:
		return podCeilingLarge, true
	}
	return podCeilingSmall, true
}

// RecommendedMaxPods is EKS's recommended max pods
// (max-pods-calculator.sh): the addressable pods, at most PodCeiling, or
// at most 110 when the vCPU count is unknown.
func (l Limits) RecommendedMaxPods(s PodShape) int {
	ceiling, ok := l.PodCeiling()
	if !ok {
		ceiling = podCeilingSmall
	}
	return min(l.AddressablePods(s), ceiling)
}

// DefaultMaxPods is the node's max pods when neither the kubelet nor
// MAX_PODS says: with prefix delegation EKS's recommended value, else the
// Amazon VPC CNI's eni-max-pods value, the addressable pods uncapped,
// which kubelets on EKS get by default.
func (l Limits) DefaultMaxPods(s PodShape) int {
	if s.PrefixDelegation && l.SupportsPrefixDelegation() {
		return l.RecommendedMaxPods(s)
	}
	return l.AddressablePods(s)
}

// fewVCPUMetal are the bare metal types with at most 30 vCPUs; every
// other .metal type has more.
var fewVCPUMetal = []string{"a1.metal"}

// VCPUs is the vCPU count of an instance type, from its size: EC2
// gives 4 vCPUs per "xlarge" unit (m5.xlarge 4, m5.8xlarge 32), at most 2
// below xlarge, and bare metal (.metal, .metal-48xl) is the family's
// largest size. The table has no vCPU column (DescribeInstanceTypes'
// VCpuInfo); these counts serve only PodCeiling's question of more than
// 30, and the exceptions to the rule that would change that answer are
// listed (hpc7a runs one thread a core; mac instances are Apple hardware;
// a1.metal has 16). 0: not derivable from the name.
func VCPUs(instanceType string) int {
	family, size, ok := strings.Cut(instanceType, ".")
	if !ok {
		return 0
	}
	switch {
	case instanceType == "hpc7a.12xlarge":
		return 24
	case strings.HasPrefix(family, "mac"):
		return 12
	case slices.Contains(fewVCPUMetal, instanceType):
		return 16
	case size == "metal":
		return 64
	case strings.HasPrefix(size, "metal-"):
		size = strings.TrimPrefix(size, "metal-")
		size = strings.TrimSuffix(size, "xl") + "xlarge"
	}
	switch size {
	case "nano", "micro", "small", "medium", "large":
		return 2
	case "xlarge":
		return 4
	}
	n, err := strconv.Atoi(strings.TrimSuffix(size, "xlarge"))
	if err != nil || !strings.HasSuffix(size, "xlarge") || n <= 0 {
		return 0
	}
	return 4 * n
}
