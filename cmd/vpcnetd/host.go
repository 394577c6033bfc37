package main

import (
	"context"
	"fmt"
	"net"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/dataplane"
)

// host adapts the dataplane to what the agent asks of the node.
type host struct{ dp *dataplane.Dataplane }

var _ agent.Host = host{}

func (h host) Setup(ctx context.Context, n agent.NodeNet) error {
	mac, err := net.ParseMAC(n.PrimaryMAC)
	if err != nil {
		return fmt.Errorf("primary ENI MAC %q from IMDS: %w", n.PrimaryMAC, err)
	}
	return h.dp.SetupHost(ctx, dataplane.HostConfig{
		PrimaryMAC: mac, PrimaryIP: n.PrimaryIP, VPCCIDRs: n.VPCCIDRs,
		ExcludeSNATCIDRs: n.ExcludeSNATCIDRs, ExternalSNAT: n.ExternalSNAT, MTU: n.MTU,
		SNATPorts: dataplane.SNATPorts(n.RandomizeSNAT), DenyPodIMDS: n.DenyPodIMDS, IPv6: n.IPv6,
	})
}

func eniConfig(e agent.ENINet) (dataplane.ENIConfig, error) {
	mac, err := net.ParseMAC(e.MAC)
	if err != nil {
		return dataplane.ENIConfig{}, fmt.Errorf("MAC %q of %s: %w", e.MAC, e.ID, err)
	}
	return dataplane.ENIConfig{MAC: mac, DeviceIndex: e.DeviceIndex, PrimaryIP: e.PrimaryIP, SubnetCIDR: e.SubnetCIDR, MTU: e.MTU}, nil
}

func (h host) SetupENI(ctx context.Context, e agent.ENINet) error {
	c, err := eniConfig(e)
	if err != nil {
		return err
	}
	return h.dp.SetupENI(ctx, c)
}

func (h host) TeardownENI(ctx context.Context, e agent.ENINet) error {
	c, err := eniConfig(e)
	if err != nil {
		return err
	}
	return h.dp.TeardownENI(ctx, c)
}

func (h host) PodAddrs(ctx context.Context) ([]nodestate.Route, error) {
	routes, err := h.dp.PodAddrs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]nodestate.Route, len(routes))
	for i, r := range routes {
		out[i] = nodestate.Route{Addr: r.Addr, Link: r.HostVeth}
	}
	return out, nil
}
