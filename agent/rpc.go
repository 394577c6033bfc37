package agent

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/ipam"
)

// rpcServer adapts the agent to the plugin's gRPC contract.
type rpcServer struct {
	agentapi.UnimplementedAgentServer
	a *Agent
}

func keyOf(at *agentapi.Attachment) (ipam.Key, error) {
	if at == nil || at.Network == "" || at.ContainerId == "" || at.IfName == "" {
		return ipam.Key{}, status.Error(codes.InvalidArgument, "attachment needs a network name, a container id and an interface name")
	}
	return ipam.Key{Network: at.Network, ContainerID: at.ContainerId, IfName: at.IfName}, nil
}

func (s *rpcServer) Add(ctx context.Context, req *agentapi.AddRequest) (*agentapi.AddReply, error) {
	key, err := keyOf(req.Attachment)
	if err != nil {
		return nil, err
	}
	// The runtime never runs two operations on one attachment at once (CNI
	// spec), so what the pool holds before the Add is the answer.
	existing := s.a.holds(key)
	as, err := s.a.Add(ctx, key, ipam.Pod{Namespace: req.PodNamespace, Name: req.PodName})
	if err != nil {
		return nil, toStatus(err)
	}
	out := s.a.reply(as)
	out.Existing = existing
	return out, nil
}

// holds says whether key already has an address.
func (a *Agent) holds(key ipam.Key) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.pool.Lookup(key)
	return ok
}

func (s *rpcServer) Del(ctx context.Context, req *agentapi.DelRequest) (*agentapi.DelReply, error) {
	key, err := keyOf(req.Attachment)
	if err != nil {
		return nil, err
	}
	as, released, err := s.a.Del(ctx, key)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &agentapi.DelReply{Released: released}
	if released {
		out.Address = as.Addr.String()
	}
	return out, nil
}

func (s *rpcServer) Check(ctx context.Context, req *agentapi.CheckRequest) (*agentapi.AddReply, error) {
	key, err := keyOf(req.Attachment)
	if err != nil {
		return nil, err
	}
	s.a.mu.Lock()
	as, ok := s.a.pool.Lookup(key)
	s.a.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "vpcnetd holds no address for %s", key)
	}
	return s.a.reply(as), nil
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
	if req.Network == "" {
		return nil, status.Error(codes.InvalidArgument, "GC needs the CNI network name")
	}
	valid := make(map[ipam.Key]bool, len(req.Valid))
	for _, at := range req.Valid {
		key, err := keyOf(at)
		if err != nil {
			return nil, err
		}
		valid[key] = true
	}
	gone, err := s.a.GC(ctx, req.Network, valid)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &agentapi.GCReply{}
	for _, as := range gone {
		out.Released = append(out.Released, as.Addr.String())
	}
	return out, nil
}

// reply is everything the plugin needs to wire the pod.
func (a *Agent) reply(as ipam.Assignment) *agentapi.AddReply {
	a.mu.Lock()
	eni, _ := a.pool.ENI(as.ENIID)
	node := a.node
	a.mu.Unlock()
	out := &agentapi.AddReply{
		Address:          as.Addr.String(),
		EniId:            as.ENIID,
		DeviceIndex:      int32(eni.DeviceIndex),
		RouteTable:       int32(RouteTable(eni.DeviceIndex)),
		SubnetCidr:       eni.SubnetCIDR.String(),
		SubnetGateway:    eni.SubnetCIDR.Addr().Next().String(),
		Mtu:              int32(a.cfg.ENIMTU),
		PodMtu:           int32(a.cfg.PodMTU),
		ExternalSnat:     a.cfg.ExternalSNAT,
		NodePrimaryIp:    node.PrimaryIP.String(),
		PodNamespace:     as.Pod.Namespace,
		PodName:          as.Pod.Name,
		VpcCidrs:         prefixStrings(node.VPCCIDRs),
		ExcludeSnatCidrs: prefixStrings(a.cfg.ExcludeSNATCIDRs),
	}
	return out
}

// toStatus gives the plugin a gRPC status whose message an operator can
// act on, with the no-address reason as machine-readable detail.
func toStatus(err error) error {
	var na *NoAddressError
	if errors.As(err, &na) {
		st := status.New(codes.ResourceExhausted, na.Error())
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: na.Reason, Domain: "vpcnet.io"}); derr == nil {
			st = d
		}
		return st.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
