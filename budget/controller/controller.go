// Package controller is vpcnet-budget, the cluster's EC2 budget
// controller (issue 15): replicas of a Deployment elect a leader with a
// Lease; the leader serves a budget.Ledger to the agents over HTTP
// (budgetapi) and writes where it listens into the Lease, where agents
// look it up; the others answer 503 until they lead. Agents prove who
// they are with their service account token, which the controller checks
// with a TokenReview.
//
// The controller keeps no state but what its Lease carries: a new leader
// starts a schedule of its own with every bucket taken as spent when the
// last leader's grants surely ended (it may have granted a whole burst
// before it stopped), and books new requests after what the last leader
// had booked as of its last renewal (BookedAnnotation), whose tickets
// come back with their slots. A leader grants only while its last
// renewal of the Lease is fresh, and no further ahead than the Lease's
// timings allow (Settings.Horizon), so none of its grants is still to
// run when the next term starts, and the refill since can be counted.
// Agents hold their jobs while the leader fails over
// (budgetapi.DefaultFailoverHold); an agent that cannot reach any leader
// for longer calls EC2 on its own budget, as it does with no controller
// installed.
//
// # API access (for the Role and ClusterRole in deploy/vpcnet.yaml)
//
//	apiGroup               resource      verbs                 why
//	coordination.k8s.io    leases        get, update           leader election on the Lease (resourceNames: its name)
//	coordination.k8s.io    leases        create                the first replica creates the Lease
//	""                     events        create                "became leader" and "stopped leading" on the Lease
//	authentication.k8s.io  tokenreviews  create                who is the agent asking (cluster-scoped: a ClusterRole)
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/clock"
)

// Options configure Run.
type Options struct {
	Settings Settings
	// REST reaches the API server.
	REST *rest.Config
	Log  *slog.Logger
	// Clock is the ledger's time; nil means the wall clock.
	Clock clock.Clock
	// Registry receives the metrics served on /metrics; nil means a new
	// one.
	Registry *prometheus.Registry
	// Listener, when set, is served instead of listening on
	// Settings.Port; the Lease then names its port (tests).
	Listener net.Listener
	// ShutdownTimeout bounds the wait for requests in flight after ctx
	// ends; default 5 s.
	ShutdownTimeout time.Duration
}

// Run serves until ctx ends: it takes part in the election, answers
// agents while it leads, and on the way out releases the Lease (so
// another replica takes over at once) before it stops serving. It
// returns an error only when it cannot start.
func Run(ctx context.Context, o Options) error {
	s := o.Settings
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	if err := s.Budget.Validate(); err != nil {
		return err
	}
	rc := rest.CopyConfig(o.REST)
	if rc.UserAgent == "" {
		rc.UserAgent = "vpcnet-budget"
	}
	// client-go's default (5 a second) would queue the TokenReviews of
	// agents arriving together past their 2 s patience, and they would
	// all go alone.
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client for %s: %w", rc.Host, err)
	}

	ln := o.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", ":"+strconv.Itoa(s.Port)); err != nil {
			return fmt.Errorf("listen (VPCNET_BUDGET_LISTEN_PORT=%d): %w", s.Port, err)
		}
	}
	defer ln.Close()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
		s.Port = tcp.Port
	}
	identity := budgetapi.HolderIdentity(s.Pod, s.Endpoint())

	var leading, observed atomic.Bool
	// Grants no further ahead than the Lease's timings allow, and only
	// while the last renewal is fresh, so none of this term's runs into
	// the next (Settings.Horizon).
	var fresh, credit time.Duration
	s.Budget.Horizon, fresh, credit = s.Horizon()
	ledger := budget.New(s.Budget)
	// elector is the election running now; renewed says its last
	// renewal of the Lease is at most fresh old.
	var elector atomic.Pointer[leaderelection.LeaderElector]
	renewed := func() bool {
		le := elector.Load()
		return le != nil && le.Check(fresh-s.LeaseDuration) == nil
	}
	var srv *budgetapi.Server
	m, err := newMetrics(reg, s.Budget, func() []budget.ActionStats { return srv.Stats() })
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	authz := NewAuthorizer(cs.AuthenticationV1().TokenReviews(), AuthorizerOptions{Allowed: s.Clients, Now: clk.Now})
	srv = budgetapi.NewServer(ledger, clk, budgetapi.ServerOptions{
		// Not once ctx ends: the Lease's release follows, and the next
		// leader counts from it (termOffset).
		Leading:   func() bool { return leading.Load() && renewed() && ctx.Err() == nil },
		Authorize: countedAuth(authz.Authorize, m, log),
		Observe:   m.observe,
	})

	leases := &bookedLeases{LeasesGetter: cs.CoordinationV1(), promise: srv.Promise, log: log}
	lease := &resourcelock.LeaseLock{
		LeaseMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Lease},
		Client:    leases,
		LockConfig: resourcelock.ResourceLockConfig{
			Identity:      identity,
			EventRecorder: &leaseEvents{events: cs.CoreV1().Events(s.Namespace), pod: s.Pod, now: clk.Now, log: log},
		},
		Labels: map[string]string{"app.kubernetes.io/name": "vpcnet-budget"},
	}
	lock := &observedLock{Interface: lease, now: clk.Now}
	watchdog := leaderelection.NewLeaderHealthzAdaptor(s.RenewDeadline)
	lec := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   s.LeaseDuration,
		RenewDeadline:   s.RenewDeadline,
		RetryPeriod:     s.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            "vpcnet-budget",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				// The last leader may have spent every burst, and granted
				// until its last renewal this replica saw was fresh old,
				// or, if it released the Lease, until it did.
				seen, released := lock.lastRenewalSeen()
				after := s.LeaseDuration - credit // fresh + horizon + callSlack
				if released {
					after -= fresh
				}
				now := clk.Now()
				last := leases.lastRead()
				srv.StartTerm(budget.Term{Now: now, EmptyAt: now.Add(termOffset(now, seen, after, credit)), Stopped: seen, Booked: last.Booked, LastTicket: last.LastTicket, Gather: budgetapi.TermGather})
				leading.Store(true)
				m.leader.Set(1)
				log.Info("leading: answering agents", "lease", s.Namespace+"/"+s.Lease, "endpoint", s.Endpoint())
			},
			OnStoppedLeading: func() {
				if leading.Swap(false) {
					log.Info("stopped leading", "lease", s.Namespace+"/"+s.Lease)
				}
				m.leader.Set(0)
			},
			OnNewLeader: func(holder string) {
				observed.Store(true)
				if holder != identity {
					log.Info("following", "leader", holder)
				}
			},
		},
	}
	if _, err := leaderelection.NewLeaderElector(lec); err != nil {
		return fmt.Errorf("leader election: %w", err)
	}

	mux := http.NewServeMux()
	mux.Handle(budgetapi.ReservePath, srv)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := watchdog.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !observed.Load() {
			http.Error(w, "not ready: the Lease "+s.Namespace+"/"+s.Lease+" has not been read yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    32 << 10,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "identity", identity, "lease", s.Namespace+"/"+s.Lease)

	// The election: a replica that lost the Lease (its renewal failed)
	// stands again.
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(lec)
		if err != nil {
			return fmt.Errorf("leader election: %w", err) // checked above; cannot happen
		}
		watchdog.SetLeaderElection(le)
		elector.Store(le)
		le.Run(ctx) // returns once it stops leading, the Lease released when ctx ended
		if ctx.Err() == nil {
			log.Warn("lost the Lease; standing again", "lease", s.Namespace+"/"+s.Lease)
		}
	}

	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	log.Info("stopped")
	return err
}

// countedAuth counts authorize's answers and logs refusals.
func countedAuth(authorize func(context.Context, string) error, m *metrics, log *slog.Logger) func(context.Context, string) error {
	return func(ctx context.Context, token string) error {
		err := authorize(ctx, token)
		switch {
		case err == nil:
			m.auth.WithLabelValues("allowed").Inc()
		case errors.Is(err, errReviewFailed):
			m.auth.WithLabelValues("error").Inc()
			log.Warn("cannot check an agent's token", "err", err)
		default:
			m.auth.WithLabelValues("refused").Inc()
			log.Info("refused an agent", "err", err)
		}
		return err
	}
}
