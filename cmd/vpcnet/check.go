package main

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/dataplane"
)

// cmdCheck verifies that the agent still holds the address of prevResult
// and that the pod's wiring is intact on both sides.
func cmdCheck(args *skel.CmdArgs) error {
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
	if conf.PrevResult == nil {
		return invalidConf("field prevResult: CHECK needs the result of ADD, and the runtime sent none")
	}
	addr, err := prevAddr(conf.PrevResult)
	if err != nil {
		return err
	}
	if !addr.IsValid() {
		return invalidConf("field prevResult: it holds no pod address")
	}
	if err := checkPrevInterfaces(conf.PrevResult, conf.hostVeth(pod), args.IfName); err != nil {
		return err
	}
	log, closeLog := conf.logger()
	defer closeLog()
	a := newAgent(conf)
	ctx, cancel := a.context()
	defer cancel()
	reply, err := a.api.Check(ctx, &agentapi.CheckRequest{Attachment: conf.attachment(args.ContainerID, args.IfName)})
	if err != nil {
		return a.cniError("check", err)
	}
	if held, _ := netip.ParseAddr(reply.Address); held != addr {
		return types.NewError(types.ErrInternal,
			fmt.Sprintf("vpcnetd holds %q for this container, but the pod was set up with %s", reply.Address, addr), "")
	}
	dp, err := dataplane.New(dataplane.Options{Log: log, VethPrefix: conf.plugin.VethPrefix})
	if err != nil {
		return invalidConf("field vethPrefix: " + err.Error())
	}
	dctx, dcancel := context.WithTimeout(context.Background(), conf.timeout)
	defer dcancel()
	if err := dp.CheckPod(dctx, dataplane.PodConfig{
		NetNS: args.Netns, IfName: args.IfName, HostVethName: conf.hostVeth(pod),
		Addr: addr, RouteTable: int(reply.RouteTable), IPv6: conf.plugin.IPv6,
	}); err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return nil
}

// checkPrevInterfaces compares prevResult's interfaces with the names this
// pod's wiring must have.
func checkPrevInterfaces(prev types.Result, hostVeth, ifName string) error {
	r, err := current.NewResultFromResult(prev)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "field prevResult: "+err.Error(), "")
	}
	var names []string
	for _, i := range r.Interfaces {
		names = append(names, i.Name)
	}
	for _, want := range []string{hostVeth, ifName} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			return types.NewError(types.ErrInternal,
				fmt.Sprintf("prevResult lists interfaces %q, not %s: the pod was not set up by this configuration", names, want), "")
		}
	}
	return nil
}
