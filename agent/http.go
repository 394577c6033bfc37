package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/version"
)

// serveHTTP starts the introspection endpoint (loopback by default: it
// shows every pod's address) and the metrics endpoint. Both carry
// /healthz and /readyz, so probes work whichever is enabled.
func (a *Agent) serveHTTP(ctx context.Context, wg *sync.WaitGroup) error {
	if !a.cfg.DisableIntrospection {
		mux := http.NewServeMux()
		a.health(mux)
		mux.HandleFunc("GET /v1/enis", a.jsonHandler(a.enisView))
		mux.HandleFunc("GET /v1/pods", a.jsonHandler(a.podsView))
		mux.HandleFunc("GET /v1/config", a.jsonHandler(a.configView))
		mux.HandleFunc("GET /v1/status", a.jsonHandler(a.statusView))
		if err := a.serve(ctx, wg, a.cfg.IntrospectionAddr, mux); err != nil {
			return err
		}
	}
	if !a.cfg.DisableMetrics {
		mux := http.NewServeMux()
		a.health(mux)
		mux.Handle("GET /metrics", promhttp.HandlerFor(a.met.gatherer, promhttp.HandlerOpts{}))
		if err := a.serve(ctx, wg, a.cfg.MetricsAddr, mux); err != nil {
			return err
		}
	}
	return nil
}

func (a *Agent) serve(ctx context.Context, wg *sync.WaitGroup, addr string, h http.Handler) error {
	var l net.Listener
	var err error
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		l, err = (&net.ListenConfig{}).Listen(ctx, "unix", path)
	} else {
		l, err = listen(ctx, addr)
	}
	if err != nil {
		return err
	}
	a.log.Info("serving HTTP", "addr", l.Addr().String())
	a.mu.Lock()
	a.httpAddrs = append(a.httpAddrs, l.Addr().String())
	a.mu.Unlock()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("HTTP endpoint stopped", "addr", addr, "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return nil
}

// health: /healthz says the process answers; /readyz says it can serve
// pods, with every condition listed, and 503 when any fails.
func (a *Agent) health(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ready, conds := a.ready.get()
		w.Header().Set("Content-Type", "application/json")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(map[string]any{"ready": ready, "conditions": conds})
	})
}

func (a *Agent) jsonHandler(view func() any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(view())
	}
}

// The /v1 views are introspect's types: one contract for the agent and
// every reader.
type (
	eniView    = introspect.ENI
	blockView  = introspect.Block
	holdView   = introspect.Hold
	statusView = introspect.Status
	ipamCounts = introspect.Counts
)

func holdOf(as ipam.Assignment) holdView {
	h := holdView{Address: as.Addr.String(), ContainerID: as.Key.ContainerID, IfName: as.Key.IfName, Network: as.Key.Network, Since: as.AssignedAt, Quarantined: isQuarantine(as.Key)}
	if as.Pod.Name != "" {
		h.Pod = as.Pod.String()
	}
	return h
}

func (a *Agent) enisView() any {
	a.mu.Lock()
	defer a.mu.Unlock()
	holders := make(map[string][]holdView)
	for _, as := range a.pool.Assignments() {
		holders[as.Block.String()] = append(holders[as.Block.String()], holdOf(as))
	}
	st := a.pool.Stats(a.now())
	out := make([]eniView, 0, len(st.ENIs))
	for _, es := range st.ENIs {
		e, _ := a.pool.ENI(es.ID)
		v := eniView{ID: e.ID, DeviceIndex: e.DeviceIndex, Primary: e.Primary, SubnetID: e.SubnetID, SubnetCIDR: e.SubnetCIDR.String(),
			PrimaryIP: e.PrimaryIP.String(), MAC: a.eniMeta[e.ID].MAC, RouteTable: RouteTable(e.DeviceIndex), CreatedAt: e.CreatedAt,
			Total: es.Total, Assigned: es.Assigned, Cooling: es.Cooling, Free: es.Free, Blocks: []blockView{}}
		for _, b := range es.Blocks {
			v.Blocks = append(v.Blocks, blockView{Prefix: b.Prefix.String(), Assigned: b.Assigned, Cooling: b.Cooling, Free: b.Free, Holders: holders[b.Prefix.String()]})
		}
		out = append(out, v)
	}
	return out
}

func (a *Agent) podsView() any {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []holdView{}
	for _, as := range a.pool.Assignments() {
		if !isQuarantine(as.Key) {
			out = append(out, holdOf(as))
		}
	}
	return out
}

func (a *Agent) statusView() any {
	ready, conds := a.ready.get()
	_, diag := a.diag.get()
	ks := a.kube.State()
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.pool.Stats(a.now())
	vi := version.Get()
	v := statusView{Ready: ready, Conditions: conds, Version: vi.Version, Commit: vi.Commit, LimitsSource: a.limitsSource, InstanceID: a.self.InstanceID, InstanceType: a.self.InstanceType,
		MaxENIs: a.maxENIsLocked(), IPv4PerENI: a.limits.IPv4PerENI,
		Addresses: ipamCounts{Total: st.Total, Assigned: st.Assigned, Cooling: st.Cooling, Free: st.Free},
		Waiting:   a.waiting, LastReconcile: a.lastReconcile, LastEC2Error: a.lastEC2Err, ReleaseHold: a.hold,
		Diagnostics: diag, Kubernetes: ks}
	if a.cfg.CustomNetwork {
		v.CustomNetworking = a.eniCfgMsg
	}
	if !st.NextFree.IsZero() {
		next := st.NextFree
		v.NextFree = &next
	}
	if a.lastShortfall.Short() {
		v.Shortfall = a.lastShortfall.String()
	}
	now := a.now()
	v.Planned = []string{}
	if a.self.InstanceID != "" { // the limits are known
		actions, _, _ := a.planLocked(now, nil)
		for _, act := range actions {
			v.Planned = append(v.Planned, act.String()+": "+act.Reason)
		}
	}
	if a.grow.blocked(now) {
		until := a.grow.until
		v.GrowthHeldUntil = &until
	}
	for ip := range a.quarantined {
		v.Quarantined = append(v.Quarantined, ip.String())
	}
	for _, e := range a.stale {
		v.StaleEntries = append(v.StaleEntries, holdOf(ipam.Assignment{Key: e.Key, Pod: e.Pod, Addr: e.Addr, AssignedAt: e.AssignedAt}))
	}
	return v
}

// configView is every setting with its effective value, in the
// lower-case keys every other endpoint uses.
func (a *Agent) configView() any {
	out := []introspect.Setting{}
	for _, s := range a.cfg.Settings() {
		out = append(out, introspect.Setting{Name: s.Name, Value: s.Value, Default: s.Default, Meaning: s.Meaning})
	}
	return out
}
