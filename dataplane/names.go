package dataplane

import (
	"fmt"

	"github.com/vpcnet/vpcnet/netfacts"
)

// DefaultVethPrefix is the Amazon VPC CNI's default host veth prefix.
const DefaultVethPrefix = netfacts.DefaultVethPrefix

// maxVethPrefix leaves room for the 11 hash digits within IFNAMSIZ (15).
const maxVethPrefix = 4

// HostVethName is the host-side veth of a pod: netfacts.HostVethName, the
// rule the plugin and the agent share.
func HostVethName(prefix, podNamespace, podName string) string {
	return netfacts.HostVethName(prefix, podNamespace, podName)
}

// ValidateVethPrefix applies the Amazon VPC CNI's rules for
// AWS_VPC_K8S_CNI_VETHPREFIX: at most 4 characters, and none of the
// prefixes that name the node's own interfaces.
func ValidateVethPrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("veth prefix is empty: set it to %q or another prefix of up to %d characters", DefaultVethPrefix, maxVethPrefix)
	case len(prefix) > maxVethPrefix:
		return fmt.Errorf("veth prefix %q is longer than %d characters: host veth names would exceed 15 characters", prefix, maxVethPrefix)
	case prefix == "eth" || prefix == "lo" || prefix == "vlan":
		return fmt.Errorf("veth prefix %q is reserved: it would match the node's own interfaces", prefix)
	}
	for _, r := range prefix {
		if r <= ' ' || r == '/' || r == ':' || r > '~' {
			return fmt.Errorf("veth prefix %q contains %q, which is not allowed in an interface name", prefix, r)
		}
	}
	return nil
}

// validIfName checks that name can name a Linux network interface.
func validIfName(name string) error {
	if name == "" || len(name) > 15 || name == "." || name == ".." {
		return fmt.Errorf("interface name %q must be 1-15 characters long and not \".\" or \"..\"", name)
	}
	for _, r := range name {
		if r <= ' ' || r == '/' || r == ':' || r > '~' {
			return fmt.Errorf("interface name %q contains %q", name, r)
		}
	}
	return nil
}
