package main

import (
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/vpcnet/vpcnet/agentapi"
)

// cmdStatus reports whether ADD can succeed now. The agent is the judge;
// when it is unreachable or not ready the plugin is not available (50),
// with every failing condition in the message.
func cmdStatus(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	a := newAgent(conf)
	ctx, cancel := a.context()
	defer cancel()
	reply, err := a.api.Status(ctx, &agentapi.StatusRequest{})
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, a.cniError("status", err).Msg, "")
	}
	if reply.Ready {
		return nil
	}
	var failing []string
	for _, c := range reply.Conditions {
		if !c.Ok {
			failing = append(failing, fmt.Sprintf("%s: %s", c.Name, c.Message))
		}
	}
	if len(failing) == 0 {
		failing = append(failing, "the agent gave no reason")
	}
	return types.NewError(types.ErrPluginNotAvailable, "vpcnetd is not ready: "+strings.Join(failing, "; "), "")
}

// cmdGC hands the runtime's valid attachments to the agent, which releases
// the addresses of every other attachment of this network.
func cmdGC(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	log, closeLog := conf.logger()
	defer closeLog()
	a := newAgent(conf)
	req := &agentapi.GCRequest{Network: conf.Name}
	for _, v := range conf.ValidAttachments {
		req.Valid = append(req.Valid, conf.attachment(v.ContainerID, v.IfName))
	}
	ctx, cancel := a.context()
	defer cancel()
	reply, err := a.api.GC(ctx, req)
	if err != nil {
		return a.cniError("gc", err)
	}
	if len(reply.Released) > 0 {
		log.Info("GC released addresses", "addrs", reply.Released)
	}
	return nil
}
