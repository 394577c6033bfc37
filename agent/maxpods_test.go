package agent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/limits"
)

// A subnet with room for many /28 prefixes, so only max pods limits.
var prefixTopology = strings.Replace(topology,
	"- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}",
	"- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}\n- {id: subnet-big, az: us-west-2a, cidr: 10.0.16.0/20}", 1)

func init() {
	prefixTopology = strings.Replace(prefixTopology,
		"- {id: i-node1, type: m5.large, subnet: subnet-a}",
		"- {id: i-node1, type: m5.large, subnet: subnet-a}\n- {id: i-pd, type: m5.large, subnet: subnet-big}", 1)
}

// addAll adds pods from..from+n-1 at once and returns their errors.
func addAll(ctx context.Context, a *running, from, n int) []error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = a.Add(ctx, key(from+i), pod(from+i)) })
	}
	wg.Wait()
	return errs
}

// Issue 12: with ENABLE_PREFIX_DELEGATION=true an m5.large planned to the
// secondary-address formula (29) and failed 8 of 40 pods started at once.
// Without a kubelet or MAX_PODS it now plans to EKS's rule, 110.
func TestPrefixDelegationOnAnM5LargeRuns110PodsAtOnce(t *testing.T) {
	w := newWorldOf(t, prefixTopology)
	a := w.node("i-pd", map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "VPCNET_ADD_WAIT": "20s"}).start(t)
	a.waitReady(t)
	ctx := context.Background()

	// The bug's case first: 40 at once.
	for i, err := range addAll(ctx, a, 0, 40) {
		if err != nil {
			t.Fatalf("pod %d of the first 40: %v", i, err)
		}
	}
	// Then up to 110, at once.
	for i, err := range addAll(ctx, a, 40, 70) {
		if err != nil {
			t.Fatalf("pod %d of 110: %v", 40+i, err)
		}
	}
	st := a.statusView(ctx).(statusView)
	want := introspect.MaxPods{Value: 110, Source: MaxPodsFromRule, Rule: 110, Addressable: 434, Recommended: 110}
	if st.MaxPods != want {
		t.Errorf("/v1/status maxPods = %+v, want %+v", st.MaxPods, want)
	}
	if st.Addresses.Assigned != 110 {
		t.Errorf("%d addresses assigned, want 110", st.Addresses.Assigned)
	}
	// Never a whole /28 past max pods: 7 prefixes (112 addresses) at most.
	if total := a.settle(t, func(s ipam.Stats) bool { return s.Assigned == 110 }).Total; total > 112 {
		t.Errorf("pool of %d addresses for max pods 110; want at most 7 /28s", total)
	}
}

func TestMaxPodsSettingCapsGrowthWithoutTheAPI(t *testing.T) {
	w := newWorldOf(t, prefixTopology)
	a := w.node("i-pd", map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "MAX_PODS": "20", "VPCNET_ADD_WAIT": "2s"}).start(t)
	a.waitReady(t)
	ctx := context.Background()
	for i, err := range addAll(ctx, a, 0, 20) {
		if err != nil {
			t.Fatalf("pod %d of 20: %v", i, err)
		}
	}
	st := a.statusView(ctx).(statusView)
	if st.MaxPods.Value != 20 || st.MaxPods.Source != MaxPodsFromSetting || st.MaxPods.Setting != 20 {
		t.Errorf("/v1/status maxPods = %+v, want 20 from MAX_PODS", st.MaxPods)
	}
	// 20 is far below the 110 the node could run: said, not fatal.
	if !strings.Contains(st.MaxPods.Problem, "could run 110") || st.MaxPods.Warning {
		t.Errorf("maxPods problem = %q (warning %v), want the node's capacity named", st.MaxPods.Problem, st.MaxPods.Warning)
	}
	// Two /28s hold 32 addresses, enough for 20; a third is never attached.
	if total := a.settle(t, func(s ipam.Stats) bool { return s.Total > 0 }).Total; total > 32 {
		t.Errorf("pool of %d addresses for max pods 20; want at most two /28s", total)
	}
}

// The kubelet's value wins and is followed; one that the node cannot
// address, or far below what it could run, is an Event, a status problem
// and a metric.
func TestTheKubeletsMaxPodsIsPlannedToAndJudged(t *testing.T) {
	w := newWorldOf(t, prefixTopology)
	k := newFakeKube(KubeState{Reachable: true, Node: "n", MaxPods: 29})
	n := w.node("i-pd", map[string]string{"ENABLE_PREFIX_DELEGATION": "true"})
	n.kube = k
	a := n.start(t)
	a.waitReady(t)

	// 29, the secondary-address value, on a prefix node: far too few.
	ev := k.waitEvent(t, EventMaxPodsBelowCapacity, ipam.Pod{})
	if ev.Warning || !strings.Contains(ev.Message, "the kubelet advertises 29 pods") || !strings.Contains(ev.Message, "could run 110") {
		t.Errorf("Event = %+v", ev)
	}
	waitMaxPods(t, a, func(mp introspect.MaxPods) bool { return mp.Value == 29 && mp.Source == MaxPodsFromKubelet })
	metricHas(t, a, "vpcnet_max_pods 29", `vpcnet_max_pods_mismatch{kind="below_capacity"} 1`, "vpcnet_addressable_pods 434")

	// The kubelet restarted with 110: planned to, and nothing to say.
	k.set(func(st *KubeState) { st.MaxPods = 110 })
	mp := waitMaxPods(t, a, func(mp introspect.MaxPods) bool { return mp.Value == 110 })
	if mp.Problem != "" {
		t.Errorf("kubelet 110 on an m5.large with prefixes: problem %q", mp.Problem)
	}
	for i, err := range addAll(context.Background(), a, 0, 40) {
		if err != nil {
			t.Fatalf("pod %d of 40: %v", i, err)
		}
	}

	// More than the node can address (434): pods past it would fail.
	k.set(func(st *KubeState) { st.MaxPods = 500 })
	ev = k.waitEvent(t, EventMaxPodsAboveAddressable, ipam.Pod{})
	if !ev.Warning || !strings.Contains(ev.Message, "can address only 434") {
		t.Errorf("Event = %+v", ev)
	}
	metricHas(t, a, `vpcnet_max_pods_mismatch{kind="above_addressable"} 1`, `vpcnet_max_pods_mismatch{kind="below_capacity"} 0`)
}

func waitMaxPods(t *testing.T, a *running, ok func(introspect.MaxPods) bool) introspect.MaxPods {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var mp introspect.MaxPods
	for time.Now().Before(deadline) {
		mp = a.statusView(context.Background()).(statusView).MaxPods
		if ok(mp) {
			return mp
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("/v1/status maxPods never as expected; last %+v", mp)
	return mp
}

func metricHas(t *testing.T, a *running, wants ...string) {
	t.Helper()
	a.mu.Lock()
	metrics := "http://" + a.httpAddrs[1]
	a.mu.Unlock()
	_, body := get(t, metrics+"/metrics")
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestMaxPodsVerdicts(t *testing.T) {
	m5, _ := limits.Lookup("m5.large")
	m524, _ := limits.Lookup("m5.24xlarge")
	tests := []struct {
		name    string
		l       limits.Limits
		cfg     config.Config
		kubelet int
		value   int
		source  string
		problem string // a part of it; "" means none
		warning bool
	}{
		{"rule, prefixes", m5, config.Config{PrefixDelegation: true, MaxENI: -1}, 0, 110, MaxPodsFromRule, "", false},
		{"rule, secondary", m5, config.Config{MaxENI: -1}, 0, 29, MaxPodsFromRule, "", false},
		{"kubelet 110 on secondary addresses", m5, config.Config{MaxENI: -1}, 110, 110, MaxPodsFromKubelet, "can address only 29", true},
		{"kubelet 29 on prefixes", m5, config.Config{PrefixDelegation: true, MaxENI: -1}, 29, 29, MaxPodsFromKubelet, "could run 110", false},
		{"kubelet 58 on prefixes: not far below", m5, config.Config{PrefixDelegation: true, MaxENI: -1}, 58, 58, MaxPodsFromKubelet, "", false},
		{"kubelet 737 on a large node", m524, config.Config{MaxENI: -1}, 737, 737, MaxPodsFromKubelet, "", false},
		{"kubelet 110 on a large node", m524, config.Config{MaxENI: -1}, 110, 110, MaxPodsFromKubelet, "could run 250", false},
		{"kubelet over MAX_PODS", m5, config.Config{MaxENI: -1, MaxPods: 20}, 25, 25, MaxPodsFromKubelet, "", false},
		{"MAX_PODS over addressable", m5, config.Config{MaxENI: -1, MaxPods: 40}, 0, 40, MaxPodsFromSetting, "MAX_PODS says 40 pods", true},
		{"MAX_ENI lowers addressable", m5, config.Config{MaxENI: 1}, 29, 29, MaxPodsFromKubelet, "can address only 11", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mp := newMaxPodsBase(tt.l, tt.cfg).resolve(tt.kubelet)
			if mp.Value != tt.value || mp.Source != tt.source {
				t.Errorf("max pods %d from %s, want %d from %s", mp.Value, mp.Source, tt.value, tt.source)
			}
			if (tt.problem == "") != (mp.Problem == "") || !strings.Contains(mp.Problem, tt.problem) || mp.Warning != tt.warning {
				t.Errorf("problem %q (warning %v), want %q (warning %v)", mp.Problem, mp.Warning, tt.problem, tt.warning)
			}
		})
	}
}
