package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/netfacts"
)

// rpcServer adapts the agent to the plugin's contract (agentapi).
type rpcServer struct {
	a *Agent
}

var _ agentapi.Handler = (*rpcServer)(nil)

// keyOf is the attachment of an Add or Check, held to the rules the plugin
// and the checkpoint share (netfacts): what is recorded can be read back.
func keyOf(at *agentapi.Attachment) (ipam.Key, error) {
	if at == nil {
		return ipam.Key{}, agentapi.Errorf(agentapi.InvalidArgument, "attachment needs a network name, a container id and an interface name")
	}
	if err := netfacts.ValidateAttachment(at.Network, at.ContainerId, at.IfName); err != nil {
		return ipam.Key{}, agentapi.Errorf(agentapi.InvalidArgument, "attachment: %v", err)
	}
	return ipam.Key{Network: at.Network, ContainerID: at.ContainerId, IfName: at.IfName}, nil
}

// anyKeyOf is the attachment of a Del or a GC's list: only non-empty, so
// an entry recorded before the rules existed can still be released.
func anyKeyOf(at *agentapi.Attachment) (ipam.Key, error) {
	if at == nil || at.Network == "" || at.ContainerId == "" || at.IfName == "" {
		return ipam.Key{}, agentapi.Errorf(agentapi.InvalidArgument, "attachment needs a network name, a container id and an interface name")
	}
	return ipam.Key{Network: at.Network, ContainerID: at.ContainerId, IfName: at.IfName}, nil
}

func (s *rpcServer) Add(ctx context.Context, req *agentapi.AddRequest) (*agentapi.AddReply, error) {
	key, err := keyOf(req.Attachment)
	if err != nil {
		return nil, err
	}
	if req.PodNamespace != "" || req.PodName != "" {
		if err := netfacts.ValidatePod(req.PodNamespace, req.PodName); err != nil {
			return nil, agentapi.Errorf(agentapi.InvalidArgument, "pod: %v", err)
		}
	}
	ports, err := mappingsOf(req.PortMappings, s.a.cfg.IPv6)
	if err != nil {
		return nil, agentapi.Errorf(agentapi.InvalidArgument, "%v", err)
	}
	// The pod's NetworkPolicy rules are written while the checkpoint
	// that records its address is: the owner announces the address
	// before that write is on disk, so the Add waits for the longer of
	// the two rather than their sum. It answers only once both are done.
	var announced nodestate.Reply
	var admitted <-chan error
	r, err := s.a.add(ctx, key, ipam.Pod{Namespace: req.PodNamespace, Name: req.PodName}, func(as nodestate.Reply) {
		announced, admitted = as, s.a.policy.admitting(ctx, as.Assignment)
	})
	if err != nil {
		if admitted != nil {
			<-admitted
			// The Add fails after its address was announced (a failed
			// write took it back, or the caller gave up): the rules
			// written for it go, unless an earlier ADD holds it.
			if !announced.Existing {
				s.a.policy.forget(key)
			}
		}
		return nil, toStatus(err)
	}
	if admitted == nil {
		// Nothing announced: an earlier ADD's address, already on disk,
		// or a reply that came before this goroutine took the
		// announcement (the write was over by then anyway).
		admitted = s.a.policy.admitting(ctx, r.Assignment)
	}
	if err := s.a.ports.put(ctx, r.Assignment, ports); err != nil {
		<-admitted
		s.undoAdd(ctx, key, r, "hostPorts")
		return nil, agentapi.Errorf(agentapi.Internal, "hostPorts of %s: %v", key, err)
	}
	// The pod's policies are in force before the plugin routes to it.
	if err := <-admitted; err != nil {
		s.undoAdd(ctx, key, r, "NetworkPolicy rules")
		return nil, agentapi.Errorf(agentapi.Unavailable, "NetworkPolicy of %s: %v", key, err)
	}
	out := s.a.reply(r.Assignment, r.ENI)
	out.Existing = r.Existing
	return out, nil
}

// undoAdd follows an Add that failed after its address was given. The
// plugin releases nothing after a failed Add: an address this call took
// goes back, with the NetworkPolicy rules written for it; one an earlier
// ADD holds stays, rules and all.
func (s *rpcServer) undoAdd(ctx context.Context, key ipam.Key, r nodestate.Reply, what string) {
	if r.Existing {
		return
	}
	if _, _, err := s.a.Del(ctx, key); err != nil {
		s.a.log.Error("release the address of an Add whose "+what+" failed; GC will", "key", key.String(), "err", err)
	}
	s.a.policy.forget(key)
}

func (s *rpcServer) Del(ctx context.Context, req *agentapi.DelRequest) (*agentapi.DelReply, error) {
	key, err := anyKeyOf(req.Attachment)
	if err != nil {
		return nil, err
	}
	// The hostPorts go first: a failure leaves the address held, and the
	// runtime's retry finds both as they were.
	if err := s.a.ports.drop(ctx, key); err != nil {
		return nil, agentapi.Errorf(agentapi.Unavailable, "remove hostPorts of %s: %v", key, err)
	}
	as, released, err := s.a.Del(ctx, key)
	if err != nil {
		return nil, toStatus(err)
	}
	s.a.policy.forget(key)
	out := &agentapi.DelReply{Released: released}
	if released {
		out.Address = as.Addr.String()
	}
	if s.a.veths != nil && req.HostVeth != "" && req.HostVethIndex > 0 {
		out.VethDeleting = true
		go deleteVeth(s.a.veths, s.a.log, req.HostVeth, int(req.HostVethIndex))
	}
	return out, nil
}

// vethDeleteTimeout bounds deleting one pod's veth pair after its DEL.
const vethDeleteTimeout = 30 * time.Second

// deleteVeth deletes a deleted pod's veth pair after its DEL has
// answered. Nothing routes to it any more, and the address is in
// cooldown; a veth this misses goes with the pod's namespace, which the
// runtime deletes after the DEL.
func deleteVeth(v Veths, log *slog.Logger, name string, index int) {
	ctx, cancel := context.WithTimeout(context.Background(), vethDeleteTimeout)
	defer cancel()
	if err := v.DeleteVeth(ctx, name, index); err != nil {
		log.Warn("delete a deleted pod's veth; it goes with the pod's network namespace", "veth", name, "err", err)
	}
}

func (s *rpcServer) Check(ctx context.Context, req *agentapi.CheckRequest) (*agentapi.AddReply, error) {
	key, err := keyOf(req.Attachment)
	if err != nil {
		return nil, err
	}
	var as ipam.Assignment
	var eni ipam.ENI
	var ok bool
	if err := s.a.query(ctx, func(n *nodestate.Node) { as, eni, ok = n.Lookup(key) }); err != nil {
		return nil, toStatus(err)
	}
	if !ok {
		return nil, agentapi.Errorf(agentapi.NotFound, "vpcnetd holds no address for %s", key)
	}
	return s.a.reply(as, eni), nil
}

func (s *rpcServer) Status(ctx context.Context, _ *agentapi.StatusRequest) (*agentapi.StatusReply, error) {
	ready, conds := s.a.ready.get()
	out := &agentapi.StatusReply{Ready: ready}
	for _, c := range conds {
		out.Conditions = append(out.Conditions, &agentapi.Condition{Name: c.Name, Ok: c.OK, Message: c.Message})
	}
	return out, nil
}

func (s *rpcServer) GC(ctx context.Context, req *agentapi.GCRequest) (*agentapi.GCReply, error) {
	if err := netfacts.ValidateNetworkName(req.Network); err != nil {
		return nil, agentapi.Errorf(agentapi.InvalidArgument, "GC: %v", err)
	}
	valid := make(map[ipam.Key]bool, len(req.Valid))
	for _, at := range req.Valid {
		key, err := anyKeyOf(at)
		if err != nil {
			return nil, err
		}
		valid[key] = true
	}
	gone, err := s.a.GC(ctx, req.Network, valid)
	if err != nil {
		return nil, toStatus(err)
	}
	if len(gone) > 0 {
		if err := s.a.ports.sweep(ctx, liveHostPorts(ctx, s.a), false); err != nil {
			s.a.log.Error("remove the hostPorts of collected addresses; the next sweep will", "err", err)
		}
	}
	out := &agentapi.GCReply{}
	for _, as := range gone {
		out.Released = append(out.Released, as.Addr.String())
	}
	return out, nil
}

// Add gives key an address, waiting up to VPCNET_ADD_WAIT for the pool to
// grow when it is empty. The same key always gets the same address. The
// assignment is on disk before Add returns.
func (a *Agent) Add(ctx context.Context, key ipam.Key, pod ipam.Pod) (ipam.Assignment, error) {
	r, err := a.add(ctx, key, pod, nil)
	return r.Assignment, err
}

// add is Add with the reply and, when assigned is not nil, the address
// announced before the reply (Agent.request).
func (a *Agent) add(ctx context.Context, key ipam.Key, pod ipam.Pod, assigned func(nodestate.Reply)) (r nodestate.Reply, err error) {
	defer a.met.observeRPC("add", a.now(), &err)
	r, err = a.request(ctx, func(id uint64) nodestate.Event { return nodestate.AddRequest{ID: id, Key: key, Pod: pod} }, assigned)
	var na *NoAddressError
	if errors.As(err, &na) {
		a.met.noAddress.WithLabelValues(na.Reason).Inc()
		a.recordNoAddress(na)
	}
	return r, err
}

// Del releases key's address into cooldown. Unknown keys succeed: the
// runtime may repeat a Del, or the agent may have restarted in between.
// The checkpoint without the key is written before the pool lets go.
func (a *Agent) Del(ctx context.Context, key ipam.Key) (_ ipam.Assignment, _ bool, err error) {
	defer a.met.observeRPC("del", a.now(), &err)
	r, err := a.request(ctx, func(id uint64) nodestate.Event { return nodestate.DelRequest{ID: id, Key: key} }, nil)
	if err != nil {
		return ipam.Assignment{}, false, fmt.Errorf("release %s: %w", key, err)
	}
	return r.Assignment, r.Released, nil
}

// GC releases every assignment of network that the runtime no longer has,
// once it is older than the cooldown: an attachment whose ADD is still in
// flight is not yet in the runtime's list and must not be collected.
func (a *Agent) GC(ctx context.Context, network string, valid map[ipam.Key]bool) (_ []ipam.Assignment, err error) {
	defer a.met.observeRPC("gc", a.now(), &err)
	r, err := a.request(ctx, func(id uint64) nodestate.Event { return nodestate.GCRequest{ID: id, Network: network, Valid: valid} }, nil)
	if err != nil {
		return nil, fmt.Errorf("garbage-collect %s: %w", network, err)
	}
	return r.Gone, nil
}

// reply is everything the plugin needs to wire the pod.
func (a *Agent) reply(as ipam.Assignment, eni ipam.ENI) *agentapi.AddReply {
	node := a.info().node
	return &agentapi.AddReply{
		Address:          as.Addr.String(),
		EniId:            as.ENIID,
		DeviceIndex:      int32(eni.DeviceIndex),
		RouteTable:       int32(netfacts.RouteTable(eni.DeviceIndex)),
		SubnetCidr:       eni.SubnetCIDR.String(),
		SubnetGateway:    netfacts.SubnetGateway(eni.SubnetCIDR).String(),
		Mtu:              int32(a.cfg.ENIMTU),
		PodMtu:           int32(a.cfg.PodMTU),
		ExternalSnat:     a.cfg.ExternalSNAT,
		NodePrimaryIp:    node.PrimaryIP.String(),
		PodNamespace:     as.Pod.Namespace,
		PodName:          as.Pod.Name,
		VpcCidrs:         prefixStrings(node.VPCCIDRs),
		ExcludeSnatCidrs: prefixStrings(a.cfg.ExcludeSNATCIDRs),
	}
}

// toStatus gives the plugin an error whose message an operator can act
// on, with the no-address reason as machine-readable detail.
func toStatus(err error) error {
	var na *NoAddressError
	if errors.As(err, &na) {
		return &agentapi.Error{Code: agentapi.ResourceExhausted, Message: na.Error(), Reason: na.Reason}
	}
	if errors.Is(err, errStopped) {
		return &agentapi.Error{Code: agentapi.Unavailable, Message: err.Error()}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &agentapi.Error{Code: agentapi.DeadlineExceeded, Message: err.Error()}
	}
	return &agentapi.Error{Code: agentapi.Internal, Message: err.Error()}
}
