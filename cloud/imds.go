package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Self is the instance as IMDS describes it.
//
// IMDS is a hint: it lags EC2 by seconds, sometimes more, so Interfaces may
// miss an ENI attached a moment ago, still list one just detached, or show
// an address list from before the last assign or unassign. Use it to learn
// the node's identity and to find ENIs quickly at start; anything that
// releases an address, detaches or deletes an ENI must first be confirmed
// with EC2 (DescribeENIs, or ListENIs by instance id).
type Self struct {
	InstanceID       string
	InstanceType     string
	AvailabilityZone string
	Region           string
	// Primary is the ENI at device 0, the instance's own.
	Primary Interface
	// VPCCIDRs are all IPv4 CIDR blocks of the VPC (vpc-ipv4-cidr-blocks).
	VPCCIDRs []netip.Prefix
	// Interfaces are the ENIs IMDS shows now, Primary included, by
	// network card, then device number. An efa-only interface (no
	// address) is not among them.
	Interfaces []Interface
}

// Interface is one ENI as IMDS shows it.
type Interface struct {
	MAC          string
	DeviceNumber int
	// NetworkCard is the network card the ENI is attached through
	// (network-card; absent on types with one card, which is card 0).
	NetworkCard    int
	ID             string
	SubnetID       string
	SubnetCIDR     netip.Prefix
	SecurityGroups []string
	// IPv4s are local-ipv4s: the primary address first, then secondaries.
	IPv4s []netip.Addr
	// Prefixes are the delegated /28s (ipv4-prefix).
	Prefixes []netip.Prefix
	// SubnetIPv6CIDRs are the subnet's IPv6 /64s
	// (subnet-ipv6-cidr-blocks); none for an IPv4-only subnet.
	SubnetIPv6CIDRs []netip.Prefix
	// IPv6s are the ENI's IPv6 addresses (ipv6s), IPv6Prefixes its
	// delegated /80s (ipv6-prefix); IMDS answers 404 for either when
	// the ENI has none, as for ipv4-prefix.
	IPv6s        []netip.Addr
	IPv6Prefixes []netip.Prefix
}

// PrimaryIP is the ENI's primary private address, or the zero Addr.
func (i Interface) PrimaryIP() netip.Addr {
	if len(i.IPv4s) == 0 {
		return netip.Addr{}
	}
	return i.IPv4s[0]
}

// Bounds on what IMDS may answer. Real answers are a few hundred bytes
// and a few dozen interfaces; anything far beyond is not IMDS.
const (
	// maxIMDSAnswer bounds one answer's body.
	maxIMDSAnswer = 64 << 10
	// maxIMDSInterfaces bounds the MACs listed: each costs several calls.
	maxIMDSInterfaces = 128
	// maxNetworkCards bounds a network card index; the largest instance
	// types have 32 cards.
	maxNetworkCards = 255
)

// errIMDSNotFound marks an IMDS path that does not exist (HTTP 404).
var errIMDSNotFound = errors.New("not found")

// imdsGetter answers one IMDS metadata path, trimmed of surrounding
// space. A path that does not exist gives an error isIMDSNotFound knows.
type imdsGetter func(ctx context.Context, path string) (string, error)

// DescribeSelf reads the instance's identity and ENIs from IMDS (v2).
func (c *Client) DescribeSelf(ctx context.Context) (Self, error) {
	if c.noIMDS {
		return Self{}, errors.New("describe self: the client was built with Options.NoIMDS")
	}
	s, err := readSelf(ctx, c.imdsGet, c.log)
	if err != nil {
		return Self{}, fmt.Errorf("describe self: %w", err)
	}
	return s, nil
}

// IMDSShowsMAC says whether IMDS lists an interface with mac, which it
// does once EC2 has attached it. Asking costs none of the account's EC2
// request budget, so an attachment is waited for here; IMDS lags EC2, so
// a yes is still confirmed with EC2, once.
func (c *Client) IMDSShowsMAC(ctx context.Context, mac string) (bool, error) {
	if c.noIMDS {
		return false, errors.New("IMDS interfaces: the client was built with Options.NoIMDS")
	}
	macs, err := imdsLines(ctx, c.imdsGet, "network/interfaces/macs/")
	if err != nil {
		return false, fmt.Errorf("IMDS interfaces: %w", err)
	}
	for _, m := range macs {
		if strings.EqualFold(strings.TrimSuffix(m, "/"), mac) {
			return true, nil
		}
	}
	return false, nil
}

// readSelf is DescribeSelf over any source of answers, so tests and the
// fuzzer can feed it without HTTP.
func readSelf(ctx context.Context, get imdsGetter, log *slog.Logger) (Self, error) {
	var s Self
	var err error
	for _, f := range []struct {
		path string
		dst  *string
	}{
		{"instance-id", &s.InstanceID},
		{"instance-type", &s.InstanceType},
		{"placement/availability-zone", &s.AvailabilityZone},
	} {
		if *f.dst, err = getToken(ctx, get, f.path); err != nil {
			return Self{}, err
		}
	}
	if s.Region, err = imdsRegion(ctx, get); err != nil {
		return Self{}, err
	}
	mac, err := get(ctx, "mac")
	if err != nil {
		return Self{}, err
	}
	if mac, err = parseMAC(mac); err != nil {
		return Self{}, fmt.Errorf("IMDS mac: %w", err)
	}
	if s.VPCCIDRs, err = imdsVPCCIDRs(ctx, get, mac); err != nil {
		return Self{}, err
	}
	macs, err := imdsLines(ctx, get, "network/interfaces/macs/")
	if err != nil {
		return Self{}, err
	}
	if len(macs) > maxIMDSInterfaces {
		return Self{}, fmt.Errorf("IMDS network/interfaces/macs/ lists %d interfaces, more than the %d vpcnet reads", len(macs), maxIMDSInterfaces)
	}
	found := false
	seen := make(map[string]bool, len(macs))
	for _, m := range macs {
		m, err := parseMAC(strings.TrimSuffix(m, "/"))
		if err != nil {
			return Self{}, fmt.Errorf("IMDS network/interfaces/macs/: %w", err)
		}
		if seen[m] {
			return Self{}, fmt.Errorf("IMDS network/interfaces/macs/ lists MAC %s twice", m)
		}
		seen[m] = true
		ifc, err := imdsInterface(ctx, get, m)
		if m == mac {
			if err != nil {
				return Self{}, fmt.Errorf("primary ENI %s: %w", m, err)
			}
			if !ifc.PrimaryIP().IsValid() {
				return Self{}, fmt.Errorf("primary ENI %s: IMDS lists no local-ipv4s", m)
			}
			s.Primary, found = ifc, true
		} else if err != nil {
			if isIMDSNotFound(err) {
				// Mid attach or detach: IMDS lists the MAC before or
				// after it has the details. The next look will agree.
				log.Debug("IMDS lists an ENI it cannot describe yet; skipped", "mac", m, "err", err)
				continue
			}
			return Self{}, fmt.Errorf("ENI %s: %w", m, err)
		}
		s.Interfaces = append(s.Interfaces, ifc)
	}
	if !found {
		return Self{}, fmt.Errorf("IMDS gives the instance MAC %s but does not list it under network/interfaces/macs/", mac)
	}
	slices.SortFunc(s.Interfaces, func(a, b Interface) int {
		if a.NetworkCard != b.NetworkCard {
			return a.NetworkCard - b.NetworkCard
		}
		return a.DeviceNumber - b.DeviceNumber
	})
	return s, nil
}

func imdsInterface(ctx context.Context, get imdsGetter, mac string) (Interface, error) {
	base := "network/interfaces/macs/" + mac + "/"
	ifc := Interface{MAC: mac}
	dev, err := get(ctx, base+"device-number")
	if err != nil {
		return Interface{}, err
	}
	n, err := strconv.ParseInt(dev, 10, 64)
	if err != nil {
		return Interface{}, fmt.Errorf("IMDS %sdevice-number %s: not a number", base, quoteShort(dev))
	}
	if ifc.DeviceNumber, err = checkDeviceIndex(n); err != nil {
		return Interface{}, fmt.Errorf("IMDS %sdevice-number: %w", base, err)
	}
	switch card, err := get(ctx, base+"network-card"); {
	case isIMDSNotFound(err): // one card: card 0
	case err != nil:
		return Interface{}, err
	default:
		n, err := strconv.ParseInt(card, 10, 64)
		if err != nil || n < 0 || n > maxNetworkCards {
			return Interface{}, fmt.Errorf("IMDS %snetwork-card %s: not a network card index (0-%d)", base, quoteShort(card), maxNetworkCards)
		}
		ifc.NetworkCard = int(n)
	}
	if ifc.ID, err = getToken(ctx, get, base+"interface-id"); err != nil {
		return Interface{}, err
	}
	if ifc.SubnetID, err = getToken(ctx, get, base+"subnet-id"); err != nil {
		return Interface{}, err
	}
	cidr, err := get(ctx, base+"subnet-ipv4-cidr-block")
	if err != nil {
		return Interface{}, err
	}
	if ifc.SubnetCIDR, err = parseIPv4Prefix(cidr, minSubnetBits, maxSubnetBits); err != nil {
		return Interface{}, fmt.Errorf("IMDS %ssubnet-ipv4-cidr-block: %w", base, err)
	}
	if ifc.SecurityGroups, err = imdsLines(ctx, get, base+"security-group-ids"); err != nil {
		return Interface{}, err
	}
	for _, g := range ifc.SecurityGroups {
		if err := checkToken(g); err != nil {
			return Interface{}, fmt.Errorf("IMDS %ssecurity-group-ids: %w", base, err)
		}
	}
	ips, err := imdsLines(ctx, get, base+"local-ipv4s")
	if err != nil {
		return Interface{}, err
	}
	if ifc.IPv4s, err = parseAddrs(ips); err != nil {
		return Interface{}, fmt.Errorf("IMDS %slocal-ipv4s: %w", base, err)
	}
	prefixes, err := imdsLines(ctx, get, base+"ipv4-prefix")
	if err != nil && !isIMDSNotFound(err) { // 404: no prefixes
		return Interface{}, err
	}
	if ifc.Prefixes, err = parsePrefixes(prefixes, prefixBits, prefixBits); err != nil {
		return Interface{}, fmt.Errorf("IMDS %sipv4-prefix: %w", base, err)
	}
	if err := imdsInterfaceIPv6(ctx, get, base, &ifc); err != nil {
		return Interface{}, err
	}
	return ifc, nil
}

// imdsInterfaceIPv6 reads an interface's IPv6 entries. Each is absent
// (404) when there is nothing to list, which is no error: an IPv4-only
// subnet, an ENI without IPv6 addresses or prefixes.
func imdsInterfaceIPv6(ctx context.Context, get imdsGetter, base string, ifc *Interface) error {
	lines := func(name string) ([]string, error) {
		l, err := imdsLines(ctx, get, base+name)
		if isIMDSNotFound(err) {
			return nil, nil
		}
		return l, err
	}
	cidrs, err := lines("subnet-ipv6-cidr-blocks")
	if err != nil {
		return err
	}
	if ifc.SubnetIPv6CIDRs, err = parseIPv6Prefixes(cidrs, minSubnet6Bits, subnet6Bits); err != nil {
		return fmt.Errorf("IMDS %ssubnet-ipv6-cidr-blocks: %w", base, err)
	}
	ips, err := lines("ipv6s")
	if err != nil {
		return err
	}
	for _, s := range ips {
		a, err := parseIPv6(s)
		if err != nil {
			return fmt.Errorf("IMDS %sipv6s: %w", base, err)
		}
		ifc.IPv6s = append(ifc.IPv6s, a)
	}
	prefixes, err := lines("ipv6-prefix")
	if err != nil {
		return err
	}
	if ifc.IPv6Prefixes, err = parseIPv6Prefixes(prefixes, prefix6Bits, prefix6Bits); err != nil {
		return fmt.Errorf("IMDS %sipv6-prefix: %w", base, err)
	}
	return nil
}

func imdsVPCCIDRs(ctx context.Context, get imdsGetter, mac string) ([]netip.Prefix, error) {
	base := "network/interfaces/macs/" + mac + "/"
	lines, err := imdsLines(ctx, get, base+"vpc-ipv4-cidr-blocks")
	if isIMDSNotFound(err) {
		lines, err = imdsLines(ctx, get, base+"vpc-ipv4-cidr-block")
	}
	if err != nil {
		return nil, err
	}
	ps, err := parsePrefixes(lines, minSubnetBits, maxSubnetBits)
	if err != nil {
		return nil, fmt.Errorf("IMDS %svpc-ipv4-cidr-blocks: %w", base, err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("IMDS %svpc-ipv4-cidr-blocks: no CIDR", base)
	}
	return ps, nil
}

// imdsRegion prefers placement/region; older metadata versions only give
// the zone, whose name is the region's plus a letter.
func (c *Client) imdsRegion(ctx context.Context) (string, error) { return imdsRegion(ctx, c.imdsGet) }

func imdsRegion(ctx context.Context, get imdsGetter) (string, error) {
	r, err := getToken(ctx, get, "placement/region")
	if err == nil {
		return r, nil
	}
	if !isIMDSNotFound(err) {
		return "", err
	}
	az, err := getToken(ctx, get, "placement/availability-zone")
	if err != nil {
		return "", err
	}
	if len(az) < 2 {
		return "", fmt.Errorf("IMDS placement/availability-zone %q: not a zone name", az)
	}
	return az[:len(az)-1], nil
}

// imdsGet reads one IMDS path, at most maxIMDSAnswer bytes of it.
func (c *Client) imdsGet(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	out, err := c.imds.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", fmt.Errorf("IMDS %s: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, maxIMDSAnswer+1))
	if err != nil {
		return "", fmt.Errorf("IMDS %s: read: %w", path, err)
	}
	if len(b) > maxIMDSAnswer {
		return "", fmt.Errorf("IMDS %s: the answer is longer than %d bytes, the most vpcnet reads", path, maxIMDSAnswer)
	}
	return strings.TrimSpace(string(b)), nil
}

func imdsLines(ctx context.Context, get imdsGetter, path string) ([]string, error) {
	s, err := get(ctx, path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(s), nil
}

// getToken reads an identifier (an instance, subnet or interface id, an
// instance type, a zone or region name): EC2 filters, tags and logs carry
// it, so it must be one word of the characters AWS uses.
func getToken(ctx context.Context, get imdsGetter, path string) (string, error) {
	v, err := get(ctx, path)
	if err != nil {
		return "", err
	}
	if err := checkToken(v); err != nil {
		return "", fmt.Errorf("IMDS %s: %w", path, err)
	}
	return v, nil
}

// checkToken is a loop rather than the regexp
// ^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$: its bounded repeat compiles to a
// program of 3,000 allocations (240 KB) made at start-up and held for the
// agent's life.
func checkToken(v string) error {
	if !isAWSIdentifier(v) {
		return fmt.Errorf("%s is not an AWS identifier (1-255 letters, digits, '.', '_' or '-')", quoteShort(v))
	}
	return nil
}

// isAWSIdentifier: 1-255 ASCII letters, digits, '.', '_' or '-', the first a
// letter or digit.
func isAWSIdentifier(v string) bool {
	if len(v) == 0 || len(v) > 255 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

func isIMDSNotFound(err error) bool {
	var re *smithyhttp.ResponseError
	return errors.Is(err, errIMDSNotFound) || errors.As(err, &re) && re.HTTPStatusCode() == 404
}

func parseAddrs(ss []string) ([]netip.Addr, error) {
	var as []netip.Addr
	for _, s := range ss {
		a, err := parseIPv4(s)
		if err != nil {
			return nil, err
		}
		as = append(as, a)
	}
	return as, nil
}

func parsePrefixes(ss []string, minBits, maxBits int) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, s := range ss {
		p, err := parseIPv4Prefix(s, minBits, maxBits)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}
