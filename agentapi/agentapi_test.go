package agentapi

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// handler answers from fields and reports the context of a blocked Add.
type handler struct {
	addErr  error
	blocked chan struct{} // Add waits for its context when set
	ended   chan error
}

func (h *handler) Add(ctx context.Context, req *AddRequest) (*AddReply, error) {
	if h.blocked != nil {
		close(h.blocked)
		<-ctx.Done()
		h.ended <- ctx.Err()
		return nil, ctx.Err()
	}
	if h.addErr != nil {
		return nil, h.addErr
	}
	return &AddReply{Address: "10.0.1.5", EniId: "eni-1", PodName: req.PodName, VpcCidrs: []string{"10.0.0.0/16"}}, nil
}

func (h *handler) Del(_ context.Context, req *DelRequest) (*DelReply, error) {
	return &DelReply{Address: "10.0.1.5", Released: req.Attachment != nil}, nil
}

func (h *handler) Check(context.Context, *CheckRequest) (*AddReply, error) {
	return nil, Errorf(NotFound, "vpcnetd holds no address for %s", "x")
}

func (h *handler) Status(context.Context, *StatusRequest) (*StatusReply, error) {
	return &StatusReply{Ready: true, Conditions: []*Condition{{Name: "socket", Ok: true}}}, nil
}

func (h *handler) GC(_ context.Context, req *GCRequest) (*GCReply, error) {
	return &GCReply{Released: []string{req.Network}}, nil
}

func serve(t *testing.T, h Handler) (*Client, *Server) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "a.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(h)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; !errors.Is(err, ErrServerStopped) {
			t.Errorf("Serve = %v, want ErrServerStopped", err)
		}
	})
	return &Client{Socket: sock}, s
}

func TestCallsCarryTheirMessagesAndErrors(t *testing.T) {
	c, _ := serve(t, &handler{})
	ctx := context.Background()
	add, err := c.Add(ctx, &AddRequest{Attachment: &Attachment{Network: "n", ContainerId: "c", IfName: "eth0"}, PodName: "web"})
	if err != nil || add.Address != "10.0.1.5" || add.PodName != "web" || len(add.VpcCidrs) != 1 {
		t.Fatalf("Add = %+v, %v", add, err)
	}
	del, err := c.Del(ctx, &DelRequest{Attachment: &Attachment{Network: "n"}})
	if err != nil || !del.Released || del.Address != "10.0.1.5" {
		t.Fatalf("Del = %+v, %v", del, err)
	}
	if _, err := c.Check(ctx, &CheckRequest{}); CodeOf(err) != NotFound || !strings.Contains(err.Error(), "holds no address for x") || AsError(err).Unreached {
		t.Fatalf("Check = %v, want NotFound with the agent's message, an answer", err)
	}
	st, err := c.Status(ctx, &StatusRequest{})
	if err != nil || !st.Ready || len(st.Conditions) != 1 || st.Conditions[0].Name != "socket" {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	gc, err := c.GC(ctx, &GCRequest{Network: "aws-cni"})
	if err != nil || len(gc.Released) != 1 || gc.Released[0] != "aws-cni" {
		t.Fatalf("GC = %+v, %v", gc, err)
	}
}

func TestAnErrorKeepsItsCodeAndReason(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		code       Code
		reason     string
		messageHas string
	}{
		{"agent error", &Error{Code: ResourceExhausted, Message: "subnet exhausted", Reason: "SubnetExhausted"}, ResourceExhausted, "SubnetExhausted", "subnet exhausted"},
		{"plain error", errors.New("disk full"), Internal, "", "disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := serve(t, &handler{addErr: tt.err})
			_, err := c.Add(context.Background(), &AddRequest{})
			e := AsError(err)
			if e.Code != tt.code || e.Reason != tt.reason || !strings.Contains(e.Message, tt.messageHas) || e.Unreached {
				t.Fatalf("Add = %#v; want code %s, reason %q, a message with %q", e, tt.code, tt.reason, tt.messageHas)
			}
		})
	}
}

func TestAnAbsentAgentIsUnreached(t *testing.T) {
	c := &Client{Socket: filepath.Join(t.TempDir(), "none.sock")}
	_, err := c.Status(context.Background(), &StatusRequest{})
	if e := AsError(err); !e.Unreached || e.Code != Unavailable || !strings.Contains(e.Message, "none.sock") {
		t.Fatalf("Status with no agent = %#v; want Unavailable, unreached, naming the socket", e)
	}
}

// The agent must stop waiting for a pool to grow once the plugin has
// given up (its timeout, or the runtime killed it).
func TestAClientThatGivesUpEndsTheCallOnTheServer(t *testing.T) {
	h := &handler{blocked: make(chan struct{}), ended: make(chan error, 1)}
	c, _ := serve(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Add(ctx, &AddRequest{}); errc <- err }()
	<-h.blocked
	cancel()
	if err := <-errc; CodeOf(err) != DeadlineExceeded || !AsError(err).Unreached {
		t.Fatalf("Add after the caller gave up = %v, want DeadlineExceeded, unreached", err)
	}
	// Blocks until the test's deadline if the server never notices.
	if err := <-h.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the handler's context ended with %v, want Canceled", err)
	}
}

func TestStopEndsCallsInFlightAndServeReturns(t *testing.T) {
	h := &handler{blocked: make(chan struct{}), ended: make(chan error, 1)}
	c, s := serve(t, h)
	errc := make(chan error, 1)
	go func() { _, err := c.Add(context.Background(), &AddRequest{}); errc <- err }()
	<-h.blocked
	s.Stop()
	if err := <-h.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the handler's context ended with %v, want Canceled", err)
	}
	if err := <-errc; err == nil {
		t.Fatal("a call ended by Stop succeeded")
	}
	if _, err := c.Status(context.Background(), &StatusRequest{}); !AsError(err).Unreached {
		t.Fatalf("Status after Stop = %v, want unreached", err)
	}
}

func TestAnUnknownMethodIsUnimplemented(t *testing.T) {
	c, _ := serve(t, &handler{})
	if err := c.call(context.Background(), "Frobnicate", struct{}{}, &struct{}{}); CodeOf(err) != Unimplemented {
		t.Fatalf("unknown method = %v, want Unimplemented", err)
	}
}
