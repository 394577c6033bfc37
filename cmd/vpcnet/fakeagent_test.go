package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/vpcnet/vpcnet/agentapi"
)

// fakeAgent is an in-memory vpcnetd: it hands out the addresses it is
// given, in order, and records what the plugin asked.
type fakeAgent struct {
	socket string
	srv    *agentapi.Server

	// mu guards the fields below.
	mu         sync.Mutex
	free       []lease
	held       map[string]lease // by attachment key
	addErr     error            // returned by Add when set
	notReady   []*agentapi.Condition
	dels       []string // attachment keys, in order
	gcRequests []*agentapi.GCRequest
	onDel      func() // called as a Del arrives, before it is answered
	// onAdd is called as an Add arrives, before it is answered, with the
	// call's context (ended when the plugin hangs up); an error is the
	// answer.
	onAdd func(context.Context) error
	// editReply, when set, changes every Add and Check reply.
	editReply func(*agentapi.AddReply)
	// ports are the port mappings of each Add, by attachment key.
	ports map[string][]agentapi.PortMapping
	// deletesVeths answers Dels that name a veth with VethDeleting, as
	// vpcnetd does; vethDels records them as "name index".
	deletesVeths bool
	vethDels     []string
}

// lease is an address and the table of its ENI.
type lease struct {
	addr  string
	table int32
}

var _ agentapi.Handler = (*fakeAgent)(nil)

func startFakeAgent(t *testing.T, free ...lease) *fakeAgent {
	t.Helper()
	a := &fakeAgent{socket: filepath.Join(t.TempDir(), "vpcnetd.sock"), free: free, held: map[string]lease{}}
	a.start(t)
	return a
}

func (a *fakeAgent) start(t *testing.T) {
	t.Helper()
	l, err := net.Listen("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	a.srv = agentapi.NewServer(a)
	go func() { _ = a.srv.Serve(l) }()
	t.Cleanup(a.srv.Stop)
}

// stop makes the agent unreachable; the socket file stays behind when
// crashed, as after a kill -9.
func (a *fakeAgent) stop(crashed bool) {
	if crashed {
		a.srv.Stop()
		// Serve removes the file on Stop; put a dead socket back.
		if l, err := net.Listen("unix", a.socket); err == nil {
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
		}
		return
	}
	a.srv.Stop()
}

func key(at *agentapi.Attachment) string {
	if at == nil {
		return "//"
	}
	return fmt.Sprintf("%s/%s/%s", at.Network, at.ContainerId, at.IfName)
}

func (a *fakeAgent) Add(ctx context.Context, req *agentapi.AddRequest) (*agentapi.AddReply, error) {
	a.mu.Lock()
	onAdd := a.onAdd
	a.mu.Unlock()
	if onAdd != nil {
		if err := onAdd(ctx); err != nil {
			return nil, err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.addErr != nil {
		return nil, a.addErr
	}
	k := key(req.Attachment)
	if a.ports == nil {
		a.ports = map[string][]agentapi.PortMapping{}
	}
	a.ports[k] = req.PortMappings
	l, ok := a.held[k]
	if !ok {
		if len(a.free) == 0 {
			return nil, agentapi.Errorf(agentapi.ResourceExhausted, "no free address")
		}
		l, a.free = a.free[0], a.free[1:]
		a.held[k] = l
	}
	out := a.reply(l, req.PodNamespace, req.PodName)
	out.Existing = ok
	return out, nil
}

func (a *fakeAgent) reply(l lease, ns, name string) *agentapi.AddReply {
	out := &agentapi.AddReply{
		Address: l.addr, EniId: "eni-0123", DeviceIndex: l.table - 1, RouteTable: l.table,
		SubnetCidr: "10.0.1.0/24", SubnetGateway: "10.0.1.1", VpcCidrs: []string{"10.0.0.0/16"},
		Mtu: 9001, PodMtu: 9001, NodePrimaryIp: "10.0.0.10", PodNamespace: ns, PodName: name,
	}
	if a.editReply != nil {
		a.editReply(out)
	}
	return out
}

func (a *fakeAgent) Del(_ context.Context, req *agentapi.DelRequest) (*agentapi.DelReply, error) {
	a.mu.Lock()
	onDel := a.onDel
	a.mu.Unlock()
	if onDel != nil {
		onDel()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := key(req.Attachment)
	a.dels = append(a.dels, k)
	out := &agentapi.DelReply{}
	if a.deletesVeths && req.HostVeth != "" {
		out.VethDeleting = true
		a.vethDels = append(a.vethDels, fmt.Sprintf("%s %d", req.HostVeth, req.HostVethIndex))
	}
	l, ok := a.held[k]
	if !ok {
		return out, nil
	}
	delete(a.held, k)
	a.free = append(a.free, l)
	out.Address, out.Released = l.addr, true
	return out, nil
}

func (a *fakeAgent) Check(_ context.Context, req *agentapi.CheckRequest) (*agentapi.AddReply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, ok := a.held[key(req.Attachment)]
	if !ok {
		return nil, agentapi.Errorf(agentapi.NotFound, "no assignment for %s", key(req.Attachment))
	}
	return a.reply(l, "", ""), nil
}

func (a *fakeAgent) Status(context.Context, *agentapi.StatusRequest) (*agentapi.StatusReply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	conds := append([]*agentapi.Condition{{Name: "checkpoint", Ok: true, Message: "loaded"}}, a.notReady...)
	return &agentapi.StatusReply{Ready: len(a.notReady) == 0, Conditions: conds}, nil
}

func (a *fakeAgent) GC(_ context.Context, req *agentapi.GCRequest) (*agentapi.GCReply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gcRequests = append(a.gcRequests, req)
	return &agentapi.GCReply{}, nil
}

func (a *fakeAgent) setOnDel(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onDel = f
}

// holdAdds makes every Add wait until release is closed, or until the
// plugin hangs up, which Add then answers with an error; arrived gets a
// value as each Add arrives. err, when set, is what Add answers after the
// wait.
func (a *fakeAgent) holdAdds(err error) (arrived <-chan struct{}, release chan<- struct{}) {
	in, out := make(chan struct{}, 16), make(chan struct{})
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onAdd = func(ctx context.Context) error {
		in <- struct{}{}
		select {
		case <-out:
			return err
		case <-ctx.Done():
			return agentapi.Errorf(agentapi.Unavailable, "the plugin hung up: %v", ctx.Err())
		}
	}
	return in, out
}

func (a *fakeAgent) setEditReply(f func(*agentapi.AddReply)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.editReply = f
}

func (a *fakeAgent) setAddErr(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.addErr = err
}

func (a *fakeAgent) setNotReady(c ...*agentapi.Condition) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notReady = c
}

func (a *fakeAgent) holds() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]string{}
	for k, l := range a.held {
		out[k] = l.addr
	}
	return out
}
