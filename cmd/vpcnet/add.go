package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/dataplane"
)

func cmdAdd(args *skel.CmdArgs) (err error) {
	began := time.Now()
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	pod, err := parseArgs(args.Args)
	if err != nil {
		return err
	}
	if err := pod.requirePod(); err != nil {
		return err
	}
	if err := conf.validAttachment(args); err != nil {
		return err
	}
	log, closeLog := conf.logger()
	defer closeLog()
	ports, err := portMappings(conf, log)
	if err != nil {
		return err
	}
	a := newAgent(conf)
	dp, err := dataplane.New(dataplane.Options{Log: log, VethPrefix: conf.plugin.VethPrefix})
	if err != nil {
		return invalidConf("field vethPrefix: " + err.Error())
	}
	hostVeth := conf.hostVeth(pod)
	pre := startPrewire(dp, dataplane.PodConfig{NetNS: args.Netns, IfName: args.IfName, HostVethName: hostVeth, IPv6: conf.plugin.IPv6}, kernelTimeout)
	defer pre.cancel()

	ctx, cancel := a.context()
	defer cancel()
	rpcStart := time.Now()
	reply, err := a.api.Add(ctx, &agentapi.AddRequest{
		Attachment:   conf.attachment(args.ContainerID, args.IfName),
		PodNamespace: pod.namespace, PodName: pod.name, Netns: args.Netns,
		PortMappings: ports,
	})
	rpcTook := time.Since(rpcStart)
	if err != nil {
		pre.abandon(log, args.ContainerID)
		return a.cniError("add", err)
	}
	// From here the agent holds an address for us: any failure gives it back
	// and undoes the wiring, or the address would leak until GC.
	var wired *dataplane.PodConfig
	defer func() {
		if err == nil {
			return
		}
		if wired != nil {
			if derr := dp.DelPod(context.Background(), *wired); derr != nil {
				log.Error("rollback: unwire pod", "container", args.ContainerID, "err", derr)
			}
		} else {
			pre.abandon(log, args.ContainerID)
		}
		if reply.Existing {
			// A repeated ADD: the address was this attachment's before
			// this call, and the pod the first ADD wired may use it.
			log.Warn("rollback: keeping the address the attachment held before this ADD", "container", args.ContainerID, "addr", reply.Address)
			return
		}
		rctx, rcancel := a.context()
		defer rcancel()
		if _, derr := a.api.Del(rctx, &agentapi.DelRequest{Attachment: conf.attachment(args.ContainerID, args.IfName)}); derr != nil {
			log.Error("rollback: release address; the agent's GC will", "container", args.ContainerID, "err", derr)
		}
	}()

	cfg, err := podConfig(reply, args, hostVeth, conf.plugin.IPv6)
	if err != nil {
		return err
	}
	dctx, dcancel := context.WithTimeout(context.Background(), kernelTimeout)
	defer dcancel()
	// wire runs from the agent's reply to the pod wired, so it includes
	// any wait for the prewiring still under way: the time ADD spent on
	// the kernel after the agent answered.
	wireStart := time.Now()
	links, err := pre.finish(dctx, dp, cfg)
	wireTook := time.Since(wireStart)
	if err != nil {
		if errors.Is(err, dataplane.ErrNetNSNotFound) {
			return types.NewError(types.ErrInvalidNetNS, err.Error(), "")
		}
		return types.NewError(types.ErrInternal, "wire pod: "+err.Error(), "")
	}
	wired = &cfg
	if len(ports) > 0 {
		if err := dp.AllowLocalnet(dctx, cfg.HostVethName); err != nil {
			return types.NewError(types.ErrInternal, "hostPort from 127.0.0.1: "+err.Error(), "")
		}
	}
	// The phase times let an operator (and the benchmark driver) see
	// whether a slow ADD waited on the agent or on the kernel; prewire ran
	// alongside rpc, so it is not part of took's sum.
	log.Info("pod added", "container", args.ContainerID, "pod", pod.namespace+"/"+pod.name, "addr", cfg.Addr, "eni", reply.EniId,
		"rpc", rpcTook, "prewire", pre.took, "wire", wireTook, "took", time.Since(began))
	return types.PrintResult(result(cfg, links, args.Netns), conf.CNIVersion)
}

// podConfig checks the agent's reply and turns it into the pod's wiring:
// an address of the family the configuration says (ipv6).
func podConfig(r *agentapi.AddReply, args *skel.CmdArgs, hostVeth string, ipv6 bool) (dataplane.PodConfig, error) {
	addr, err := netip.ParseAddr(r.Address)
	switch {
	case ipv6 && (err != nil || !addr.Is6() || addr.Is4In6() || addr.Zone() != ""):
		return dataplane.PodConfig{}, types.NewError(types.ErrInternal,
			fmt.Sprintf("vpcnetd add: returned address %q, which is not an IPv6 address (the CNI configuration says ipv6)", r.Address), "")
	case !ipv6 && (err != nil || !addr.Is4()):
		return dataplane.PodConfig{}, types.NewError(types.ErrInternal,
			fmt.Sprintf("vpcnetd add: returned address %q, which is not an IPv4 address", r.Address), "")
	}
	mtu := int(r.PodMtu)
	if mtu == 0 {
		mtu = int(r.Mtu)
	}
	return dataplane.PodConfig{
		NetNS: args.Netns, IfName: args.IfName, HostVethName: hostVeth,
		Addr: addr, RouteTable: int(r.RouteTable), MTU: mtu, IPv6: ipv6,
	}, nil
}

// result is the CNI result: the host veth, the pod interface, the pod's
// /32 with 169.254.1.1 as its gateway, and the default route; for an IPv6
// pod its /128 with fe80::1, as aws-node's IPv6 mode answers.
func result(cfg dataplane.PodConfig, links dataplane.PodLinks, netns string) *current.Result {
	gw := net.IP(dataplane.PodGateway().AsSlice())
	bits, zero := 32, net.IPv4zero.To4()
	if cfg.IPv6 {
		gw, bits, zero = net.IP(dataplane.PodGateway6().AsSlice()), 128, net.IPv6zero
	}
	return &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: links.Host.Name, Mac: links.Host.MAC.String()},
			{Name: links.Pod.Name, Mac: links.Pod.MAC.String(), Sandbox: netns},
		},
		IPs: []*current.IPConfig{{
			Interface: current.Int(1),
			Address:   net.IPNet{IP: cfg.Addr.AsSlice(), Mask: net.CIDRMask(bits, bits)},
			Gateway:   gw,
		}},
		Routes: []*types.Route{{Dst: net.IPNet{IP: zero, Mask: net.CIDRMask(0, bits)}, GW: gw}},
	}
}

// prevAddr is the pod's address in a previous result, if any: IPv4, or
// a global IPv6 one (an IPv6 pod's).
func prevAddr(prev types.Result) (netip.Addr, error) {
	if prev == nil {
		return netip.Addr{}, nil
	}
	r, err := current.NewResultFromResult(prev)
	if err != nil {
		return netip.Addr{}, types.NewError(types.ErrDecodingFailure, "field prevResult: "+err.Error(), "")
	}
	for _, ip := range r.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok && (a.Unmap().Is4() || a.IsGlobalUnicast()) {
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, nil
}
