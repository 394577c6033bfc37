package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	// Interfaces are the ENIs IMDS shows now, Primary included, by device
	// number.
	Interfaces []Interface
}

// Interface is one ENI as IMDS shows it.
type Interface struct {
	MAC            string
	DeviceNumber   int
	ID             string
	SubnetID       string
	SubnetCIDR     netip.Prefix
	SecurityGroups []string
	// IPv4s are local-ipv4s: the primary address first, then secondaries.
	IPv4s []netip.Addr
	// Prefixes are the delegated /28s (ipv4-prefix).
	Prefixes []netip.Prefix
}

// PrimaryIP is the ENI's primary private address, or the zero Addr.
func (i Interface) PrimaryIP() netip.Addr {
	if len(i.IPv4s) == 0 {
		return netip.Addr{}
	}
	return i.IPv4s[0]
}

// DescribeSelf reads the instance's identity and ENIs from IMDS (v2).
func (c *Client) DescribeSelf(ctx context.Context) (Self, error) {
	if c.noIMDS {
		return Self{}, errors.New("describe self: the client was built with Options.NoIMDS")
	}
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
		if *f.dst, err = c.imdsGet(ctx, f.path); err != nil {
			return Self{}, fmt.Errorf("describe self: %w", err)
		}
	}
	if s.Region, err = c.imdsRegion(ctx); err != nil {
		return Self{}, fmt.Errorf("describe self: %w", err)
	}
	mac, err := c.imdsGet(ctx, "mac")
	if err != nil {
		return Self{}, fmt.Errorf("describe self: %w", err)
	}
	if s.VPCCIDRs, err = c.imdsVPCCIDRs(ctx, mac); err != nil {
		return Self{}, fmt.Errorf("describe self: %w", err)
	}
	macs, err := c.imdsLines(ctx, "network/interfaces/macs/")
	if err != nil {
		return Self{}, fmt.Errorf("describe self: %w", err)
	}
	found := false
	for _, m := range macs {
		m = strings.TrimSuffix(m, "/")
		ifc, err := c.imdsInterface(ctx, m)
		if m == mac {
			if err != nil {
				return Self{}, fmt.Errorf("describe self: primary ENI %s: %w", m, err)
			}
			s.Primary, found = ifc, true
		} else if err != nil {
			if isIMDSNotFound(err) {
				// Mid attach or detach: IMDS lists the MAC before or
				// after it has the details. The next look will agree.
				c.log.Debug("IMDS lists an ENI it cannot describe yet; skipped", "mac", m, "err", err)
				continue
			}
			return Self{}, fmt.Errorf("describe self: ENI %s: %w", m, err)
		}
		s.Interfaces = append(s.Interfaces, ifc)
	}
	if !found {
		return Self{}, fmt.Errorf("describe self: IMDS gives the instance MAC %s but does not list it under network/interfaces/macs/", mac)
	}
	slices.SortFunc(s.Interfaces, func(a, b Interface) int { return a.DeviceNumber - b.DeviceNumber })
	return s, nil
}

func (c *Client) imdsInterface(ctx context.Context, mac string) (Interface, error) {
	base := "network/interfaces/macs/" + mac + "/"
	ifc := Interface{MAC: mac}
	dev, err := c.imdsGet(ctx, base+"device-number")
	if err != nil {
		return Interface{}, err
	}
	if ifc.DeviceNumber, err = strconv.Atoi(dev); err != nil {
		return Interface{}, fmt.Errorf("IMDS %sdevice-number %q: not a number", base, dev)
	}
	if ifc.ID, err = c.imdsGet(ctx, base+"interface-id"); err != nil {
		return Interface{}, err
	}
	if ifc.SubnetID, err = c.imdsGet(ctx, base+"subnet-id"); err != nil {
		return Interface{}, err
	}
	cidr, err := c.imdsGet(ctx, base+"subnet-ipv4-cidr-block")
	if err != nil {
		return Interface{}, err
	}
	if ifc.SubnetCIDR, err = netip.ParsePrefix(cidr); err != nil {
		return Interface{}, fmt.Errorf("IMDS %ssubnet-ipv4-cidr-block: %w", base, err)
	}
	if ifc.SecurityGroups, err = c.imdsLines(ctx, base+"security-group-ids"); err != nil {
		return Interface{}, err
	}
	ips, err := c.imdsLines(ctx, base+"local-ipv4s")
	if err != nil {
		return Interface{}, err
	}
	if ifc.IPv4s, err = parseAddrs(ips); err != nil {
		return Interface{}, fmt.Errorf("IMDS %slocal-ipv4s: %w", base, err)
	}
	prefixes, err := c.imdsLines(ctx, base+"ipv4-prefix")
	if err != nil && !isIMDSNotFound(err) { // 404: no prefixes
		return Interface{}, err
	}
	if ifc.Prefixes, err = parsePrefixes(prefixes); err != nil {
		return Interface{}, fmt.Errorf("IMDS %sipv4-prefix: %w", base, err)
	}
	return ifc, nil
}

func (c *Client) imdsVPCCIDRs(ctx context.Context, mac string) ([]netip.Prefix, error) {
	base := "network/interfaces/macs/" + mac + "/"
	lines, err := c.imdsLines(ctx, base+"vpc-ipv4-cidr-blocks")
	if isIMDSNotFound(err) {
		lines, err = c.imdsLines(ctx, base+"vpc-ipv4-cidr-block")
	}
	if err != nil {
		return nil, err
	}
	ps, err := parsePrefixes(lines)
	if err != nil {
		return nil, fmt.Errorf("IMDS %svpc-ipv4-cidr-blocks: %w", base, err)
	}
	return ps, nil
}

// imdsRegion prefers placement/region; older metadata versions only give
// the zone, whose name is the region's plus a letter.
func (c *Client) imdsRegion(ctx context.Context) (string, error) {
	r, err := c.imdsGet(ctx, "placement/region")
	if err == nil {
		return r, nil
	}
	if !isIMDSNotFound(err) {
		return "", err
	}
	az, err := c.imdsGet(ctx, "placement/availability-zone")
	if err != nil {
		return "", err
	}
	if len(az) < 2 {
		return "", fmt.Errorf("IMDS placement/availability-zone %q: not a zone name", az)
	}
	return az[:len(az)-1], nil
}

func (c *Client) imdsGet(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	out, err := c.imds.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", fmt.Errorf("IMDS %s: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	if err != nil {
		return "", fmt.Errorf("IMDS %s: read: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (c *Client) imdsLines(ctx context.Context, path string) ([]string, error) {
	s, err := c.imdsGet(ctx, path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(s), nil
}

func isIMDSNotFound(err error) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == 404
}

func parseAddrs(ss []string) ([]netip.Addr, error) {
	var as []netip.Addr
	for _, s := range ss {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, err
		}
		as = append(as, a)
	}
	return as, nil
}

func parsePrefixes(ss []string) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p.Masked())
	}
	return ps, nil
}
