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

	"github.com/vpcnet/vpcnet/ipam"
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
		mux.HandleFunc("GET /v1/config", a.jsonHandler(func() any { return a.cfg.Settings() }))
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

// The /v1 views. Field names are part of the interface operators script
// against: add fields, never rename them.

type eniView struct {
	ID          string      `json:"id"`
	DeviceIndex int         `json:"deviceIndex"`
	Primary     bool        `json:"primary"`
	SubnetID    string      `json:"subnetId"`
	SubnetCIDR  string      `json:"subnetCidr"`
	PrimaryIP   string      `json:"primaryIp"`
	MAC         string      `json:"mac"`
	RouteTable  int         `json:"routeTable"`
	CreatedAt   time.Time   `json:"createdAt"`
	Total       int         `json:"total"`
	Assigned    int         `json:"assigned"`
	Cooling     int         `json:"cooling"`
	Free        int         `json:"free"`
	Blocks      []blockView `json:"blocks"`
}

type blockView struct {
	Prefix   string     `json:"prefix"`
	Assigned int        `json:"assigned"`
	Cooling  int        `json:"cooling"`
	Free     int        `json:"free"`
	Holders  []holdView `json:"holders,omitempty"`
}

type holdView struct {
	Address     string    `json:"address"`
	Pod         string    `json:"pod,omitempty"`
	ContainerID string    `json:"containerId"`
	IfName      string    `json:"ifName"`
	Network     string    `json:"network"`
	Since       time.Time `json:"since"`
	Quarantined bool      `json:"quarantined,omitempty"`
}

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

type statusView struct {
	Ready         bool        `json:"ready"`
	Conditions    []Condition `json:"conditions"`
	InstanceID    string      `json:"instanceId"`
	InstanceType  string      `json:"instanceType"`
	MaxENIs       int         `json:"maxEnis"`
	IPv4PerENI    int         `json:"ipv4PerEni"`
	Addresses     ipamCounts  `json:"addresses"`
	Waiting       int         `json:"waiting"`
	LastReconcile time.Time   `json:"lastReconcile"`
	LastEC2Error  string      `json:"lastEc2Error,omitempty"`
	Shortfall     string      `json:"shortfall,omitempty"`
	// Planned is what the planner would change now, with its reasons:
	// empty means the pool is at the target the settings ask for.
	Planned []string `json:"planned"`
	// GrowthHeldUntil is set while growth waits after EC2 refused it.
	GrowthHeldUntil *time.Time `json:"growthHeldUntil,omitempty"`
	ReleaseHold     string     `json:"releaseHold,omitempty"`
	Quarantined     []string   `json:"quarantined,omitempty"`
	StaleEntries    []holdView `json:"staleCheckpointEntries,omitempty"`
	// Diagnostics never make the agent unready; doctor reads them.
	Diagnostics      []Condition `json:"diagnostics"`
	Kubernetes       KubeState   `json:"kubernetes"`
	CustomNetworking string      `json:"customNetworking,omitempty"`
}

type ipamCounts struct {
	Total    int `json:"total"`
	Assigned int `json:"assigned"`
	Cooling  int `json:"cooling"`
	Free     int `json:"free"`
}

func (a *Agent) statusView() any {
	ready, conds := a.ready.get()
	_, diag := a.diag.get()
	ks := a.kube.State()
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.pool.Stats(a.now())
	v := statusView{Ready: ready, Conditions: conds, InstanceID: a.self.InstanceID, InstanceType: a.self.InstanceType,
		MaxENIs: a.maxENIsLocked(), IPv4PerENI: a.limits.IPv4PerENI,
		Addresses: ipamCounts{Total: st.Total, Assigned: st.Assigned, Cooling: st.Cooling, Free: st.Free},
		Waiting:   a.waiting, LastReconcile: a.lastReconcile, LastEC2Error: a.lastEC2Err, ReleaseHold: a.hold,
		Diagnostics: diag, Kubernetes: ks}
	if a.cfg.CustomNetwork {
		v.CustomNetworking = a.eniCfgMsg
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
