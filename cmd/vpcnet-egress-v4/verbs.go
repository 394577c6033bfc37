package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/dataplane"
)

// kernelTimeout bounds the plugin's own work on the node's kernel, as
// the vpcnet plugin's does (see its kernelTimeout).
const kernelTimeout = 4 * time.Minute

// cmdAdd asks the delegated IPAM plugin for an address, wires it and
// passes the previous result on with the egress interfaces added. Like
// aws-node's, it adds no IP to the result: the pod's address for
// Kubernetes stays its IPv6 one, and 169.254.172.x is the node's business.
func cmdAdd(args *skel.CmdArgs) (err error) {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	if conf.PrevResult == nil {
		return invalidConf(fmt.Sprintf("field prevResult is missing: %s runs chained after vpcnet in a conflist, not alone", cniconf.EgressV4Type))
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "field prevResult: "+err.Error(), "")
	}
	if !conf.enabled {
		return types.PrintResult(prev, conf.CNIVersion)
	}
	log, closeLog := conf.logger()
	defer closeLog()

	// The IPAM plugin is exec'd as aws-node execs it (invoke is what the
	// reference plugins' ipam.ExecAdd calls): the ipam section then means
	// what it means there, and host-local's own allocation files in
	// aws-node's dataDir are shared across a switch-over.
	res, err := invoke.DelegateAdd(context.Background(), conf.entry.IPAM.Type, args.StdinData, nil)
	if err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("IPAM plugin %s: %v", conf.entry.IPAM.Type, err), "")
	}
	defer func() {
		if err != nil {
			if derr := invoke.DelegateDel(context.Background(), conf.entry.IPAM.Type, args.StdinData, nil); derr != nil {
				log.Error("rollback: release the egress address", "container", args.ContainerID, "err", derr)
			}
		}
	}()
	cfg, err := conf.egressConfig(args, res)
	if err != nil {
		return err
	}
	log.Debug("IPAM result", "container", args.ContainerID, "result", res, "wiring", cfg)
	dp, err := dataplane.New(dataplane.Options{Log: log})
	if err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), kernelTimeout)
	defer cancel()
	links, err := dp.AddEgressV4(ctx, cfg)
	if err != nil {
		if errors.Is(err, dataplane.ErrNetNSNotFound) {
			return types.NewError(types.ErrInvalidNetNS, err.Error(), "")
		}
		return types.NewError(types.ErrInternal, "wire IPv4 egress: "+err.Error(), "")
	}
	prev.Interfaces = append(prev.Interfaces,
		&current.Interface{Name: links.Host.Name, Mac: links.Host.MAC.String()},
		&current.Interface{Name: links.Pod.Name, Mac: links.Pod.MAC.String(), Sandbox: args.Netns})
	log.Info("pod egress added", "container", args.ContainerID, "addr", cfg.Addr, "snat", cfg.SNAT.NodeIP)
	return types.PrintResult(prev, conf.CNIVersion)
}

// egressConfig turns the IPAM result into the pod's wiring: one IPv4
// address with a gateway, and IPAM's routes.
func (c *netConf) egressConfig(args *skel.CmdArgs, res types.Result) (dataplane.EgressV4Config, error) {
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return dataplane.EgressV4Config{}, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("IPAM plugin %s result: %v", c.entry.IPAM.Type, err), "")
	}
	if len(r.IPs) != 1 {
		return dataplane.EgressV4Config{}, types.NewError(types.ErrInternal,
			fmt.Sprintf("IPAM plugin %s returned %d addresses, want one IPv4 address: give ipam one IPv4 range set", c.entry.IPAM.Type, len(r.IPs)), "")
	}
	ipc := r.IPs[0]
	a, ok := netip.AddrFromSlice(ipc.Address.IP)
	bits, _ := ipc.Address.Mask.Size()
	gw, gok := netip.AddrFromSlice(ipc.Gateway)
	if !ok || !a.Unmap().Is4() || !gok || !gw.Unmap().Is4() {
		return dataplane.EgressV4Config{}, types.NewError(types.ErrInternal,
			fmt.Sprintf("IPAM plugin %s returned %s with gateway %v, want an IPv4 address and gateway", c.entry.IPAM.Type, ipc.Address.String(), ipc.Gateway), "")
	}
	cfg := c.baseConfig(args)
	cfg.Addr, cfg.Gateway = netip.PrefixFrom(a.Unmap(), bits), gw.Unmap()
	for _, rt := range r.Routes {
		if p, ok := prefixOf(rt.Dst); ok {
			cfg.Routes = append(cfg.Routes, p)
		}
	}
	return cfg, nil
}

func (c *netConf) baseConfig(args *skel.CmdArgs) dataplane.EgressV4Config {
	return dataplane.EgressV4Config{
		NetNS: args.Netns, IfName: cniconf.EgressV4IfName,
		HostVethName: dataplane.EgressV4VethName(c.Name, args.ContainerID, args.IfName),
		MTU:          c.mtu, SNAT: c.snat, Owner: c.owner(args.ContainerID, args.IfName),
	}
}

// cmdDel unwires the pod's egress, then releases its address, so that IPAM
// never hands out an address the node still routes to this pod. It
// succeeds when there is nothing left, also when the pod's namespace is
// gone (the SNAT set's comment still names the address).
func cmdDel(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	if !conf.enabled {
		return nil
	}
	log, closeLog := conf.logger()
	defer closeLog()
	dp, err := dataplane.New(dataplane.Options{Log: log})
	if err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), kernelTimeout)
	defer cancel()
	addrs, err := dp.DelEgressV4(ctx, conf.baseConfig(args))
	if err != nil {
		return types.NewError(types.ErrInternal, "unwire IPv4 egress: "+err.Error(), "")
	}
	if err := invoke.DelegateDel(context.Background(), conf.entry.IPAM.Type, args.StdinData, nil); err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("IPAM plugin %s: release: %v", conf.entry.IPAM.Type, err), "")
	}
	log.Info("pod egress deleted", "container", args.ContainerID, "addrs", addrs)
	return nil
}

// cmdCheck asks IPAM whether the attachment holds an address and checks
// the wiring of the address the pod's v4if0 has.
func cmdCheck(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	if !conf.enabled {
		return nil
	}
	if conf.PrevResult == nil {
		return invalidConf(fmt.Sprintf("field prevResult is missing: CHECK of %s needs the result of its ADD", cniconf.EgressV4Type))
	}
	if err := invoke.DelegateCheck(context.Background(), conf.entry.IPAM.Type, args.StdinData, nil); err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("IPAM plugin %s: %v", conf.entry.IPAM.Type, err), "")
	}
	dp, err := dataplane.New(dataplane.Options{})
	if err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	cfg := conf.baseConfig(args)
	addr, err := dp.EgressV4Addr(args.Netns, cfg.IfName)
	if err != nil {
		return types.NewError(types.ErrInternal, "check IPv4 egress: "+err.Error(), "")
	}
	if !addr.IsValid() {
		return types.NewError(types.ErrInternal, fmt.Sprintf("check IPv4 egress: %s in %s does not exist or has no IPv4 address", cfg.IfName, args.Netns), "")
	}
	gw, ok := conf.gatewayFor(addr.Addr())
	if !ok {
		return types.NewError(types.ErrInternal, fmt.Sprintf("check IPv4 egress: %s's address %s is in none of ipam.ranges", cfg.IfName, addr), "")
	}
	cfg.Addr, cfg.Gateway, cfg.Routes = addr, gw, conf.routes()
	ctx, cancel := context.WithTimeout(context.Background(), kernelTimeout)
	defer cancel()
	if err := dp.CheckEgressV4(ctx, cfg); err != nil {
		return types.NewError(types.ErrInternal, "check IPv4 egress: "+err.Error(), "")
	}
	return nil
}

// prefixOf converts a route's destination.
func prefixOf(n net.IPNet) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(n.String())
	return p.Masked(), err == nil
}

// cmdGC removes the egress of the network's attachments the runtime no
// longer lists (CNI 1.1 GC: a pod whose DEL never came), releasing each
// one's address through IPAM as its DEL would, then lets IPAM collect its
// own. The SNAT set, whose comments name attachments, is the list of what
// this plugin wired.
func cmdGC(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	if !conf.enabled {
		return nil
	}
	log, closeLog := conf.logger()
	defer closeLog()
	valid := make(map[string]bool, len(conf.ValidAttachments))
	for _, a := range conf.ValidAttachments {
		valid[conf.owner(a.ContainerID, a.IfName)] = true
	}
	dp, err := dataplane.New(dataplane.Options{Log: log})
	if err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), kernelTimeout)
	defer cancel()
	ipamType := conf.entry.IPAM.Type
	release := func(owner string) error {
		// An owner is network/container/ifname, none holding a "/".
		parts := strings.Split(strings.TrimPrefix(owner, conf.Name+"/"), "/")
		if len(parts) != 2 {
			return fmt.Errorf("%q is not network/container/ifname", owner)
		}
		path, err := invoke.FindInPath(ipamType, filepath.SplitList(os.Getenv("CNI_PATH")))
		if err != nil {
			return err
		}
		del := &invoke.Args{Command: "DEL", ContainerID: parts[0], IfName: parts[1], Path: os.Getenv("CNI_PATH")}
		return invoke.ExecPluginWithoutResult(ctx, path, args.StdinData, del, nil)
	}
	owners, err := dp.GCEgressV4(ctx, conf.Name, func(owner string) bool { return valid[owner] }, release)
	if len(owners) > 0 {
		log.Info("stale pod egress collected", "attachments", owners)
	}
	if err != nil {
		return types.NewError(types.ErrInternal, "collect stale IPv4 egress: "+err.Error(), "")
	}
	if err := invoke.DelegateGC(ctx, ipamType, args.StdinData, nil); err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("IPAM plugin %s: GC: %v", ipamType, err), "")
	}
	return nil
}
