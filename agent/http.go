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

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/netfacts"
	"github.com/vpcnet/vpcnet/version"
)

// serveHTTP starts the introspection endpoint (loopback by default: it
// shows every pod's address) and the metrics endpoint. Both carry
// /healthz and /readyz, so probes work whichever is enabled.
func (a *Agent) serveHTTP(ctx context.Context, wg *sync.WaitGroup) error {
	if !a.cfg.DisableIntrospection {
		mux := http.NewServeMux()
		a.health(mux)
		mux.HandleFunc("GET /v1/enis", jsonHandler(a.enisView))
		mux.HandleFunc("GET /v1/pods", jsonHandler(a.podsView))
		mux.HandleFunc("GET /v1/config", jsonHandler(a.configView))
		mux.HandleFunc("GET /v1/status", jsonHandler(a.statusView))
		mux.HandleFunc("GET /v1/policy", func(w http.ResponseWriter, r *http.Request) {
			pod := r.URL.Query().Get("pod")
			jsonHandler(func(ctx context.Context) any { return a.policy.view(ctx, pod) })(w, r)
		})
		if err := a.serve(ctx, wg, a.cfg.IntrospectionAddr, mux); err != nil {
			return err
		}
	}
	if !a.cfg.DisableMetrics {
		mux := http.NewServeMux()
		a.health(mux)
		// Uncompressed: for a gzip response the handler makes a compressor
		// of 650 KB (compress/flate's tables) and pools it, so every
		// scrape left 1.3 MB on the agent's heap, to save 19 KB of a 23 KB
		// text (250 pods) on a scrape every 15-60 s.
		mux.Handle("GET /metrics", promhttp.HandlerFor(a.met.gatherer, promhttp.HandlerOpts{DisableCompression: true}))
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

func jsonHandler(view func(ctx context.Context) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(view(r.Context()))
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
	h := holdView{Address: as.Addr.String(), ContainerID: as.Key.ContainerID, IfName: as.Key.IfName, Network: as.Key.Network, Since: as.AssignedAt, Quarantined: nodestate.IsQuarantine(as.Key)}
	if as.Pod.Name != "" {
		h.Pod = as.Pod.String()
	}
	return h
}

func (a *Agent) enisView(ctx context.Context) any {
	out := []eniView{}
	v, ok := a.view(ctx)
	if !ok {
		return out
	}
	holders := make(map[string][]holdView)
	for _, as := range v.Assignments {
		holders[as.Block.String()] = append(holders[as.Block.String()], holdOf(as))
	}
	for _, es := range v.Stats.ENIs {
		e := v.ENIs[es.ID]
		ev := eniView{ID: e.ID, DeviceIndex: e.DeviceIndex, Primary: e.Primary, SubnetID: e.SubnetID, SubnetCIDR: e.SubnetCIDR.String(),
			PrimaryIP: e.PrimaryIP.String(), MAC: e.MAC, RouteTable: netfacts.RouteTable(e.DeviceIndex), CreatedAt: e.CreatedAt,
			Total: es.Total, Assigned: es.Assigned, Cooling: es.Cooling, Free: es.Free, Blocks: []blockView{},
			DeleteOnTermination: e.DeleteOnTermination}
		for _, b := range es.Blocks {
			ev.Blocks = append(ev.Blocks, blockView{Prefix: b.Prefix.String(), Assigned: b.Assigned, Cooling: b.Cooling, Free: b.Free, Holders: holders[b.Prefix.String()]})
		}
		out = append(out, ev)
	}
	return out
}

func (a *Agent) podsView(ctx context.Context) any {
	out := []holdView{}
	v, _ := a.view(ctx)
	for _, as := range v.Assignments {
		if !nodestate.IsQuarantine(as.Key) {
			out = append(out, holdOf(as))
		}
	}
	return out
}

func (a *Agent) statusView(ctx context.Context) any {
	ready, conds := a.ready.get()
	_, diag := a.diag.get()
	ks := a.kube.State()
	vi := version.Get()
	sv := statusView{Ready: ready, Conditions: conds, Version: vi.Version, Commit: vi.Commit, Diagnostics: diag, Kubernetes: ks, Planned: []string{}}
	v, ok := a.view(ctx)
	if !ok {
		return sv // still starting: readiness says where
	}
	b := a.info()
	sv.LimitsSource, sv.InstanceID, sv.InstanceType = b.limitsSource, b.self.InstanceID, b.self.InstanceType
	sv.MaxENIs, sv.IPv4PerENI = min(a.maxENIs(), v.MaxENIs), b.limits.IPv4PerENI
	st := v.Stats
	sv.Addresses = ipamCounts{Total: st.Total, Assigned: st.Assigned, Cooling: st.Cooling, Free: st.Free}
	sv.Waiting, sv.LastReconcile, sv.LastEC2Error, sv.ReleaseHold, sv.Reclaimed = v.Waiting, v.LastPlan, v.LastEC2Err, v.ReleaseHold, v.Reclaimed
	a.mu.Lock()
	if a.cfg.CustomNetwork {
		sv.CustomNetworking = a.eniCfgMsg
	}
	sv.MaxPods = a.maxPods
	a.mu.Unlock()
	sv.IAM = a.pre.snapshot()
	if !st.NextFree.IsZero() {
		next := st.NextFree
		sv.NextFree = &next
	}
	if v.Shortfall.Short() {
		sv.Shortfall = v.Shortfall.String()
	}
	for _, act := range v.Planned {
		sv.Planned = append(sv.Planned, act.String()) // String ends with the reason
	}
	if !v.GrowthHeldUntil.IsZero() {
		until := v.GrowthHeldUntil
		sv.GrowthHeldUntil = &until
	}
	for _, ip := range v.Quarantined {
		sv.Quarantined = append(sv.Quarantined, ip.String())
	}
	if f := v.PrefixFallback; f != nil {
		sv.PrefixFallback = &introspect.PrefixFallback{Reason: f.Reason, SubnetID: f.SubnetID, FreeAddresses: f.FreeAddresses,
			Since: f.Since, RetryPrefixesAt: f.RetryAt, Fix: f.Fix}
	}
	for _, u := range v.Unmanaged {
		sv.Unmanaged = append(sv.Unmanaged, introspect.UnmanagedInterface{ID: u.ID, NetworkCard: u.NetworkCard, DeviceIndex: u.DeviceIndex, Reason: u.Reason})
	}
	if a.budget != nil {
		cs := a.budget.Status()
		b := &introspect.BudgetStatus{Lease: a.cfg.BudgetLease, SubnetsUnderPressure: v.UnderPressure, Granted: cs.Granted, Alone: cs.Alone, Answered: cs.Answered}
		if !cs.AloneUntil.IsZero() {
			b.AloneUntil, b.AloneBecause = &cs.AloneUntil, cs.AloneBecause
		}
		sv.Budget = b
	}
	for _, e := range v.Stale {
		sv.StaleEntries = append(sv.StaleEntries, holdOf(ipam.Assignment{Key: e.Key, Pod: e.Pod, Addr: e.Addr, AssignedAt: e.AssignedAt}))
	}
	return sv
}

// configView is every setting with its effective value, in the
// lower-case keys every other endpoint uses.
func (a *Agent) configView(context.Context) any {
	out := []introspect.Setting{}
	for _, s := range a.cfg.Settings() {
		out = append(out, introspect.Setting{Name: s.Name, Value: s.Value, Default: s.Default, Meaning: s.Meaning})
	}
	return out
}
