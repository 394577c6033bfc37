package budgetapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/clock"
)

// ErrUnavailable, in an Authorize error's chain, says the token could not
// be checked (the API server did not answer) rather than that it was
// refused: the agent is answered 503, not 403.
var ErrUnavailable = errors.New("cannot check credentials now")

// Server serves a Ledger to the agents. It is safe for concurrent use.
type Server struct {
	clk clock.Clock
	// Leading says this replica holds the Lease; the others answer 503 so
	// an agent that reached a stale leader looks the Lease up again.
	leading func() bool
	// authorize checks an agent's bearer token; nil lets anyone in.
	authorize func(ctx context.Context, token string) error
	// observe, when set, sees every answered request.
	observe func(r budget.Request, g budget.Grant)

	// mu guards ledger: every request is a few map operations.
	mu     sync.Mutex
	ledger *budget.Ledger
}

// ServerOptions are the optional parts of a Server.
type ServerOptions struct {
	// Leading says this replica holds the Lease. Nil: always.
	Leading func() bool
	// Authorize checks the bearer token of a request (the agent's
	// service account token). Nil: no check.
	Authorize func(ctx context.Context, token string) error
	// Observe sees every granted or deferred request, for metrics.
	Observe func(r budget.Request, g budget.Grant)
}

// NewServer serves l on clk's time.
func NewServer(l *budget.Ledger, clk clock.Clock, o ServerOptions) *Server {
	if o.Leading == nil {
		o.Leading = func() bool { return true }
	}
	return &Server{clk: clk, ledger: l, leading: o.Leading, authorize: o.Authorize, observe: o.Observe}
}

// Reserve answers one request: what the HTTP handler does once the
// request is read and checked.
func (s *Server) Reserve(r budget.Request) budget.Grant {
	s.mu.Lock()
	g := s.ledger.Reserve(s.clk.Now(), r)
	s.mu.Unlock()
	if s.observe != nil {
		s.observe(r, g)
	}
	return g
}

// StartTerm tells the ledger it takes over the schedule (see
// budget.Ledger.StartTerm): call it when this replica starts leading.
func (s *Server) StartTerm(t budget.Term) {
	s.mu.Lock()
	s.ledger.StartTerm(t)
	s.mu.Unlock()
}

// Promise is how far the ledger's schedule is booked, per action, and
// its last ticket (see budget.Ledger.Promise): what the leader writes
// into its Lease.
func (s *Server) Promise() budget.Promise {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.Promise(s.clk.Now())
}

// Stats is the ledger's schedule now.
func (s *Server) Stats() []budget.ActionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.Stats(s.clk.Now())
}

// ServeHTTP answers POST ReservePath.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != ReservePath {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	if !s.leading() {
		w.Header().Set(NotLeaderHeader, "1")
		http.Error(w, "not the leader: look up the Lease again", http.StatusServiceUnavailable)
		return
	}
	if s.authorize != nil {
		tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			http.Error(w, "missing bearer token: send the agent's service account token", http.StatusUnauthorized)
			return
		}
		if err := s.authorize(req.Context(), tok); err != nil {
			code := http.StatusForbidden
			if errors.Is(err, ErrUnavailable) {
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
			return
		}
	}
	r, err := decodeRequest(http.MaxBytesReader(w, req.Body, MaxRequestBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(AnswerOf(s.Reserve(r)))
}

// decodeRequest reads one bounded, valid request.
func decodeRequest(body io.Reader) (budget.Request, error) {
	var r budget.Request
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return r, fmt.Errorf("request larger than %d bytes", MaxRequestBytes)
		}
		return r, fmt.Errorf("decode request: %w", err)
	}
	if dec.More() {
		return r, fmt.Errorf("decode request: more than one JSON object")
	}
	return r, Validate(r)
}
