package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/dataplane"
	"github.com/vpcnet/vpcnet/internal/pluginlog"
)

// netConf is the plugin's entry of the conflist, checked.
type netConf struct {
	types.NetConf
	entry   cniconf.EgressV4Conf
	enabled bool
	// The rest is set only when enabled.
	mtu    int
	snat   dataplane.EgressSNAT
	ranges []ipamRange
}

// ipamRange is a host-local range as the plugin needs it: to know, at
// CHECK, which gateway IPAM gave an address.
type ipamRange struct {
	subnet  netip.Prefix
	gateway netip.Addr
}

// parseConf reads stdin. Every error is a CNI error naming the field at
// fault and what to set it to.
func parseConf(stdin []byte) (*netConf, error) {
	var c netConf
	if err := json.Unmarshal(stdin, &c.NetConf); err != nil {
		return nil, configError(err)
	}
	if err := json.Unmarshal(stdin, &c.entry); err != nil {
		return nil, configError(err)
	}
	if c.RawPrevResult != nil {
		if err := version.ParsePrevResult(&c.NetConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "field prevResult: "+err.Error(), "")
		}
	}
	switch c.entry.Enabled {
	case "true":
		c.enabled = true
	case "false", "":
		// aws-node's plugin passes the result through unless enabled is
		// "true"; the rest of the entry is then not read.
		return &c, nil
	default:
		return nil, invalidConf(fmt.Sprintf(`field enabled: %q is neither "true" nor "false": set "true" to give IPv6 pods IPv4 egress (ENABLE_V4_EGRESS), "false" to pass the previous result through`, c.entry.Enabled))
	}
	if err := c.parseEnabled(); err != nil {
		return nil, err
	}
	return &c, nil
}

// parseEnabled checks the fields an enabled plugin uses.
func (c *netConf) parseEnabled() error {
	c.mtu = dataplane.DefaultMTU
	if c.entry.MTU != "" {
		m, err := strconv.Atoi(string(c.entry.MTU))
		if err != nil || m < dataplane.MinMTU || m > dataplane.DefaultMTU {
			return invalidConf(fmt.Sprintf("field mtu: %q is not an MTU: set it to a whole number from %d to %d (aws-node renders POD_MTU, else AWS_VPC_ENI_MTU)",
				c.entry.MTU, dataplane.MinMTU, dataplane.DefaultMTU))
		}
		c.mtu = m
	}
	switch p := dataplane.SNATPorts(c.entry.RandomizeSNAT); p {
	case "":
		c.snat.Ports = dataplane.SNATPortsFullyRandom
	case dataplane.SNATPortsFullyRandom, dataplane.SNATPortsRandom, dataplane.SNATPortsSequential:
		c.snat.Ports = p
	default:
		return invalidConf(fmt.Sprintf(`field randomizeSNAT: %q is not a port mode: set it to "prng" (fully random, the default), "hashrandom" or "none", as AWS_VPC_K8S_CNI_RANDOMIZESNAT`, c.entry.RandomizeSNAT))
	}
	node, err := netip.ParseAddr(c.entry.NodeIP)
	switch {
	case c.entry.NodeIP == "":
		return invalidConf("field nodeIP is empty: set it to the node's primary IPv4 address, which IPv4 egress is SNATed to")
	case err != nil:
		return invalidConf(fmt.Sprintf("field nodeIP: %q is not an IP address: set it to the node's primary IPv4 address", c.entry.NodeIP))
	case node.Is6() && !node.Is4In6():
		return invalidConf(fmt.Sprintf("field nodeIP: %s is an IPv6 address, which makes aws-node's egress-cni give IPv4 pods IPv6 egress (ENABLE_V6_EGRESS); vpcnet-egress-v4 does only IPv4 egress: set the node's primary IPv4 address", node))
	}
	c.snat.NodeIP = node.Unmap()
	if !c.snat.NodeIP.IsGlobalUnicast() {
		return invalidConf(fmt.Sprintf("field nodeIP: %s cannot be a SNAT source: set the node's primary IPv4 address", c.snat.NodeIP))
	}
	if c.entry.IfName != "" && c.entry.IfName != cniconf.EgressV4IfName {
		return invalidConf(fmt.Sprintf("field ifName: %q: the egress interface is always %s, as aws-node's (which ignores the field): remove ifName", c.entry.IfName, cniconf.EgressV4IfName))
	}
	return c.parseIPAM()
}

// parseIPAM checks the ipam section as far as the plugin relies on it; the
// IPAM plugin reads the section itself.
func (c *netConf) parseIPAM() error {
	ipam := c.entry.IPAM
	if ipam.Type == "" {
		return invalidConf(fmt.Sprintf(`field ipam.type is empty: set it to "host-local", with "ranges": [[{"subnet": %q}]] as aws-node's`, cniconf.EgressV4Subnet))
	}
	if ipam.Type == "host-local" && len(ipam.Ranges) == 0 {
		return invalidConf(fmt.Sprintf(`field ipam.ranges is empty: set it to [[{"subnet": %q}]], aws-node's node-local range`, cniconf.EgressV4Subnet))
	}
	for i, set := range ipam.Ranges {
		for j, r := range set {
			field := fmt.Sprintf("ipam.ranges[%d][%d]", i, j)
			p, err := netip.ParsePrefix(r.Subnet)
			if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
				return invalidConf(fmt.Sprintf("field %s.subnet: %q is not an IPv4 subnet of 4 addresses or more: pods' egress addresses are IPv4 (aws-node: %s)", field, r.Subnet, cniconf.EgressV4Subnet))
			}
			rg := ipamRange{subnet: p.Masked(), gateway: p.Masked().Addr().Next()}
			if r.Gateway != "" {
				if rg.gateway, err = netip.ParseAddr(r.Gateway); err != nil || !p.Contains(rg.gateway) {
					return invalidConf(fmt.Sprintf("field %s.gateway: %q is not an address in %s: remove it to use %s", field, r.Gateway, p.Masked(), p.Masked().Addr().Next()))
				}
			}
			c.ranges = append(c.ranges, rg)
		}
	}
	for i, r := range ipam.Routes {
		field := fmt.Sprintf("ipam.routes[%d]", i)
		if p, err := netip.ParsePrefix(r.Dst); err != nil || !p.Addr().Is4() {
			return invalidConf(fmt.Sprintf(`field %s.dst: %q is not an IPv4 prefix: set "0.0.0.0/0", aws-node's`, field, r.Dst))
		}
		if r.GW != "" {
			return invalidConf(fmt.Sprintf("field %s.gw: routes go via the pod's gateway on the host veth: remove gw", field))
		}
	}
	return nil
}

// routes are the ipam section's routes, as host-local returns them.
func (c *netConf) routes() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range c.entry.IPAM.Routes {
		if p, err := netip.ParsePrefix(r.Dst); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// gatewayFor is the gateway IPAM gives with addr: its range's.
func (c *netConf) gatewayFor(addr netip.Addr) (netip.Addr, bool) {
	for _, r := range c.ranges {
		if r.subnet.Contains(addr) {
			return r.gateway, true
		}
	}
	return netip.Addr{}, false
}

// owner names the attachment in the SNAT set: the CNI attachment key.
func (c *netConf) owner(containerID, ifName string) string {
	return dataplane.EgressV4Owner(c.Name, containerID, ifName)
}

// configError explains why stdin is not a valid configuration, naming the
// field when JSON can tell.
func configError(err error) *types.Error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return types.NewError(types.ErrDecodingFailure,
			fmt.Sprintf("field %s: a JSON %s cannot be a %s: give it a %s, as aws-node's 10-aws.conflist does", typeErr.Field, typeErr.Value, typeErr.Type, typeErr.Type), "")
	case errors.As(err, &syntaxErr):
		return types.NewError(types.ErrDecodingFailure,
			fmt.Sprintf("network configuration is not valid JSON (at byte %d): %v", syntaxErr.Offset, err), "")
	}
	return types.NewError(types.ErrDecodingFailure, "network configuration: "+err.Error(), "")
}

func invalidConf(msg string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, msg, "")
}

// logger writes to pluginLogFile when set, else warnings and errors to
// stderr, which the runtime logs. pluginLogLevel debug (aws-node's
// DEBUG) logs every step.
func (c *netConf) logger() (*slog.Logger, func()) {
	level := slog.LevelInfo
	if strings.EqualFold(c.entry.LogLevel, "debug") {
		level = slog.LevelDebug
	}
	return pluginlog.Open(c.entry.LogFile, level)
}
