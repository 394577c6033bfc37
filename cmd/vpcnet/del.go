package main

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/dataplane"
)

// cmdDel unwires the pod, then releases its address. It succeeds when
// there is nothing left to do: the namespace is gone, DEL runs twice, or
// ADD never completed. When the agent cannot be reached the pod is still
// unwired (from prevResult, the pod's interface and the pod's name) and DEL
// succeeds: the agent releases the address later from its checkpoint and
// GC, while a failed DEL could leave the runtime unable to remove the
// sandbox, and a route or rule would outlive the pod.
//
// Unwiring comes first so that the agent never has the address back, to
// give to the next pod, while a route or rule of this pod still points at
// it; when unwiring fails the agent keeps the address and the runtime's
// retry of DEL finds everything as it was. Only the veth pair itself,
// which nothing routes to any more, may outlive the release: the agent
// deletes it after answering (its deletion waits on the kernel for about
// 20 ms), and the plugin does when the agent says it will not.
//
// DEL does not apply ADD's checks of the pod's names and the attachment
// key: no ADD wired a pod that fails them, so there is nothing of such a
// pod to unwire, and a key recorded before the checks existed must still
// be released.
func cmdDel(args *skel.CmdArgs) error {
	began := time.Now()
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	pod, err := parseArgs(args.Args)
	if err != nil {
		return err
	}
	log, closeLog := conf.logger()
	defer closeLog()
	addr, err := prevAddr(conf.PrevResult)
	if err != nil {
		return err
	}
	dp, err := dataplane.New(dataplane.Options{Log: log, VethPrefix: conf.plugin.VethPrefix})
	if err != nil {
		return invalidConf("field vethPrefix: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), conf.timeout)
	defer cancel()
	cfg := dataplane.PodConfig{NetNS: args.Netns, IfName: args.IfName, HostVethName: conf.hostVeth(pod), Addr: addr}
	unwireStart := time.Now()
	// With the address known, only what routes to the pod goes before the
	// release; the agent deletes the veth pair after answering, so the DEL
	// does not wait on the kernel for it.
	vethIndex, err := dp.UnroutePod(ctx, cfg)
	if err != nil {
		return types.NewError(types.ErrInternal, "unwire pod: "+err.Error(), "")
	}
	if vethIndex == 0 {
		if err := dp.DelPod(ctx, cfg); err != nil {
			return types.NewError(types.ErrInternal, "unwire pod: "+err.Error(), "")
		}
	}
	unwireTook := time.Since(unwireStart)

	rpcStart := time.Now()
	req := &agentapi.DelRequest{Attachment: conf.attachment(args.ContainerID, args.IfName)}
	if vethIndex != 0 {
		req.HostVeth, req.HostVethIndex = cfg.HostVethName, int32(vethIndex)
	}
	held, deleting, agentErr := release(newAgent(conf), req, args, log)
	rpcTook := time.Since(rpcStart)
	if vethIndex != 0 && !deleting {
		// An agent that does not delete veths, or none reached.
		if err := dp.DeleteVeth(ctx, cfg.HostVethName, vethIndex); err != nil {
			return types.NewError(types.ErrInternal, "unwire pod: "+err.Error(), "")
		}
	}
	if held.IsValid() && held != addr {
		// The runtime did not say which address the pod had (no cached
		// result): when its namespace was already gone, nothing above
		// found the address, and its host veth and rules are found by it
		// now. The address is back in cooldown, which outlasts this.
		cfg = dataplane.PodConfig{HostVethName: conf.hostVeth(pod), Addr: held}
		if err := dp.DelPod(ctx, cfg); err != nil {
			return types.NewError(types.ErrInternal, "unwire pod: "+err.Error(), "")
		}
		addr = held
	}
	if agentErr != nil {
		return agentErr
	}
	// The phase times let an operator (and the benchmark driver) see
	// whether a slow DEL waited on the kernel or on the agent.
	log.Info("pod deleted", "container", args.ContainerID, "addr", addr,
		"unwire", unwireTook, "rpc", rpcTook, "vethByAgent", deleting, "took", time.Since(began))
	return nil
}

// release asks the agent to release the attachment's address and returns
// the address it held, and whether the agent deletes the veth req names.
// An unreachable agent is not an error here; any other failure is
// returned for after the pod is unwired, so the runtime retries DEL.
func release(a *agent, req *agentapi.DelRequest, args *skel.CmdArgs, log *slog.Logger) (netip.Addr, bool, *types.Error) {
	ctx, cancel := a.context()
	defer cancel()
	reply, err := a.api.Del(ctx, req)
	switch {
	case err == nil:
		if held, perr := netip.ParseAddr(reply.Address); perr == nil && (held.Is4() || held.IsGlobalUnicast()) {
			return held, reply.VethDeleting, nil
		}
		return netip.Addr{}, reply.VethDeleting, nil
	case a.unreachable(err):
		log.Warn("agent unreachable: unwiring the pod anyway; the agent releases its address from its checkpoint",
			"container", args.ContainerID, "err", err)
		return netip.Addr{}, false, nil
	}
	return netip.Addr{}, false, a.cniError("del", err)
}
