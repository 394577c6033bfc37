package cloud

import (
	"fmt"
	"net/netip"
	"regexp"

	"github.com/vpcnet/vpcnet/netfacts"
)

// The parsers here turn what EC2 and IMDS answer into vpcnet types and
// refuse what vpcnet cannot use: the agent routes, tags and names links
// with these values, so a malformed one must stop at the client with an
// error naming it, not reach the kernel or a checkpoint.

// AWS subnet and VPC CIDR blocks are /16 to /28; an ENI's delegated
// prefixes are /28.
const (
	minSubnetBits = 16
	maxSubnetBits = 28
	prefixBits    = 28
)

// macRE is a MAC as EC2 and IMDS write it (lower case after ToLower).
var macRE = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)

// parseMAC checks a MAC. IMDS paths are built from it, so anything but
// six hex pairs could walk other metadata paths.
func parseMAC(s string) (string, error) {
	if !macRE.MatchString(s) {
		return "", fmt.Errorf("MAC %s is not six hex pairs separated by colons", quoteShort(s))
	}
	return s, nil
}

// parseIPv4 parses one IPv4 address. IPv6, an IPv4-mapped IPv6 address
// or a zone is refused: vpcnet is IPv4 only and compares addresses as
// values, so "::ffff:10.0.0.1" would never match "10.0.0.1".
func parseIPv4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("%s is not an IPv4 address", quoteShort(s))
	}
	if a.IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("%s is the unspecified address", quoteShort(s))
	}
	return a, nil
}

// parseIPv4Prefix parses an IPv4 CIDR of minBits to maxBits bits and
// returns it masked.
func parseIPv4Prefix(s string, minBits, maxBits int) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%s is not an IPv4 CIDR", quoteShort(s))
	}
	if p.Bits() < minBits || p.Bits() > maxBits {
		if minBits == maxBits {
			return netip.Prefix{}, fmt.Errorf("%s is not a /%d", quoteShort(s), minBits)
		}
		return netip.Prefix{}, fmt.Errorf("%s is not a /%d to /%d", quoteShort(s), minBits, maxBits)
	}
	return p.Masked(), nil
}

// IPv6: a VPC's block is a /44 to /56 (BYOIP) and a subnet's a /64 (a
// /44 to /64 in the API); an ENI's delegated IPv6 prefixes are /80s.
const (
	minSubnet6Bits = 44
	subnet6Bits    = 64
	prefix6Bits    = 80
)

// parseIPv6 parses one global IPv6 address: not IPv4, IPv4-mapped,
// link-local, unspecified or zoned, none of which EC2 assigns.
func parseIPv6(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%s is not an IPv6 address", quoteShort(s))
	}
	if a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsLoopback() {
		return netip.Addr{}, fmt.Errorf("%s is not an address EC2 assigns", quoteShort(s))
	}
	return a, nil
}

// parseIPv6Prefix parses an IPv6 CIDR of minBits to maxBits bits and
// returns it masked.
func parseIPv6Prefix(s string, minBits, maxBits int) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%s is not an IPv6 CIDR", quoteShort(s))
	}
	if p.Bits() < minBits || p.Bits() > maxBits {
		if minBits == maxBits {
			return netip.Prefix{}, fmt.Errorf("%s is not a /%d", quoteShort(s), minBits)
		}
		return netip.Prefix{}, fmt.Errorf("%s is not a /%d to /%d", quoteShort(s), minBits, maxBits)
	}
	return p.Masked(), nil
}

func parseIPv6Prefixes(ss []string, minBits, maxBits int) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, s := range ss {
		p, err := parseIPv6Prefix(s, minBits, maxBits)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// checkDeviceIndex refuses a device index vpcnet could give no route table.
func checkDeviceIndex(i int64) (int, error) {
	if i < 0 || i > netfacts.MaxDeviceIndex {
		return 0, fmt.Errorf("device index %d is outside 0-%d", i, netfacts.MaxDeviceIndex)
	}
	return int(i), nil
}

// quoteShort quotes s for an error, at most 64 bytes of it.
func quoteShort(s string) string {
	const maxQuoted = 64
	if len(s) <= maxQuoted {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:maxQuoted], len(s))
}
