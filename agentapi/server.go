package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Handler answers the calls. A returned error that is not an *Error is
// sent as Internal.
type Handler interface {
	Add(context.Context, *AddRequest) (*AddReply, error)
	Del(context.Context, *DelRequest) (*DelReply, error)
	Check(context.Context, *CheckRequest) (*AddReply, error)
	Status(context.Context, *StatusRequest) (*StatusReply, error)
	GC(context.Context, *GCRequest) (*GCReply, error)
}

// ioTimeout bounds reading a request and writing a reply: a client that
// connects and says nothing, or stops reading, is dropped, not waited for.
const ioTimeout = 10 * time.Second

// ErrServerStopped is what Serve returns after GracefulStop or Stop.
var ErrServerStopped = errors.New("agentapi: server stopped")

// Server serves a Handler on listeners.
type Server struct {
	h Handler
	// base is every call's parent context; Stop cancels it.
	base   context.Context
	cancel context.CancelFunc
	calls  sync.WaitGroup

	mu        sync.Mutex // guards the fields below
	listeners map[net.Listener]bool
	conns     map[net.Conn]bool
	stopped   bool
}

// NewServer makes a Server for h.
func NewServer(h Handler) *Server {
	base, cancel := context.WithCancel(context.Background())
	return &Server{h: h, base: base, cancel: cancel, listeners: map[net.Listener]bool{}, conns: map[net.Conn]bool{}}
}

// Serve accepts connections on l until the server stops, then returns
// ErrServerStopped; any other accept failure is returned as it is.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		_ = l.Close()
		return ErrServerStopped
	}
	s.listeners[l] = true
	s.mu.Unlock()
	for {
		conn, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			stopped := s.stopped
			delete(s.listeners, l)
			s.mu.Unlock()
			if stopped {
				return ErrServerStopped
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			_ = conn.Close()
			continue
		}
		s.conns[conn] = true
		s.calls.Add(1)
		s.mu.Unlock()
		go s.serveConn(conn)
	}
}

// GracefulStop stops accepting and waits for the calls in flight.
func (s *Server) GracefulStop() {
	s.closeListeners()
	s.calls.Wait()
}

// Stop stops accepting, ends the calls in flight (their contexts are
// cancelled and their connections closed) and waits for them.
func (s *Server) Stop() {
	s.closeListeners()
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.calls.Wait()
}

func (s *Server) closeListeners() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for l := range s.listeners {
		_ = l.Close()
	}
}

// serveConn answers the one call on conn.
func (s *Server) serveConn(conn net.Conn) {
	defer s.calls.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		_ = conn.Close()
	}()
	_ = conn.SetReadDeadline(time.Now().Add(ioTimeout))
	req, err := readRequest(conn)
	if err != nil {
		s.reply(conn, nil, err)
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(s.base)
	defer cancel()
	// The client sends nothing more; a read returns when it hangs up (or
	// when conn is closed below), which ends the call's context.
	go func() {
		var b [1]byte
		_, _ = conn.Read(b[:])
		cancel()
	}()
	out, err := s.dispatch(ctx, req)
	s.reply(conn, out, err)
}

// readRequest reads one request of at most maxMessage bytes: what any
// local process that can open the socket sends, so it is untrusted.
func readRequest(r io.Reader) (request, error) {
	var req request
	if err := json.NewDecoder(io.LimitReader(r, maxMessage)).Decode(&req); err != nil {
		return request{}, Errorf(InvalidArgument, "read the request: %v", err)
	}
	return req, nil
}

func (s *Server) dispatch(ctx context.Context, req request) (any, error) {
	switch req.Method {
	case MethodAdd:
		return call(ctx, req, s.h.Add)
	case MethodDel:
		return call(ctx, req, s.h.Del)
	case MethodCheck:
		return call(ctx, req, s.h.Check)
	case MethodStatus:
		return call(ctx, req, s.h.Status)
	case MethodGC:
		return call(ctx, req, s.h.GC)
	}
	return nil, Errorf(Unimplemented, "unknown method %q: the plugin and vpcnetd are from different releases?", req.Method)
}

// call decodes the request's body into a fresh In and runs f on it.
func call[In, Out any](ctx context.Context, req request, f func(context.Context, *In) (*Out, error)) (any, error) {
	in := new(In)
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, in); err != nil {
			return nil, Errorf(InvalidArgument, "%s request: %v", req.Method, err)
		}
	}
	out, err := f(ctx, in)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// reply writes the answer; a client that is gone is not an error here.
func (s *Server) reply(conn net.Conn, out any, err error) {
	var resp response
	if err != nil {
		resp.Error = AsError(err)
	} else if body, merr := json.Marshal(out); merr != nil {
		resp.Error = Errorf(Internal, "encode the reply: %v", merr)
	} else {
		resp.Body = body
	}
	msg, merr := json.Marshal(resp)
	if merr != nil {
		return
	}
	_ = conn.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, _ = conn.Write(append(msg, '\n'))
}
