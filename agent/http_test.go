package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/sim"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestIntrospectionAndMetricsShowWhoHoldsWhat(t *testing.T) {
	w := newWorld(t)
	a := w.node("i-node1", nil).start(t)
	a.waitReady(t)
	as, err := a.Add(context.Background(), key(1), pod(1))
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	intro, metrics := "http://"+a.httpAddrs[0], "http://"+a.httpAddrs[1]
	a.mu.Unlock()

	code, body := get(t, intro+"/v1/pods")
	var pods []holdView
	if code != 200 || json.Unmarshal([]byte(body), &pods) != nil || len(pods) != 1 || pods[0].Address != as.Addr.String() || pods[0].Pod != "default/p001" {
		t.Fatalf("/v1/pods = %d %s; want the one pod at %s", code, body, as.Addr)
	}
	code, body = get(t, intro+"/v1/enis")
	var enis []eniView
	if code != 200 || json.Unmarshal([]byte(body), &enis) != nil || len(enis) == 0 || !enis[0].Primary || enis[0].Assigned != 1 {
		t.Fatalf("/v1/enis = %d %s", code, body)
	}
	code, body = get(t, intro+"/v1/status")
	var st statusView
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || !st.Ready || st.InstanceType != "m5.large" || st.Addresses.Assigned != 1 {
		t.Fatalf("/v1/status = %d %s", code, body)
	}
	if code, body = get(t, intro+"/v1/config"); code != 200 || !strings.Contains(body, "WARM_ENI_TARGET") {
		t.Fatalf("/v1/config = %d %s", code, body)
	}
	for _, base := range []string{intro, metrics} {
		if code, body = get(t, base+"/readyz"); code != 200 || !strings.Contains(body, CondAddresses) {
			t.Fatalf("%s/readyz = %d %s", base, code, body)
		}
	}
	if code, body = get(t, metrics+"/metrics"); code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{`vpcnet_addresses{state="assigned"} 1`, "vpcnet_enis_max 3", `vpcnet_rpc_requests_total{method="add",result="ok"} 1`, "vpcnet_ready 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestReadinessTurnsFalseWhenEC2IsUnreachableAndThePoolIsEmpty(t *testing.T) {
	w := newWorld(t)
	a := w.node("i-node1", map[string]string{"VPCNET_ADD_WAIT": "1s"}).start(t)
	a.waitReady(t)
	// Ready may come while the first addresses are still being assigned
	// ("obtainable from EC2"); the test needs them in hand.
	a.settle(t, func(st ipam.Stats) bool { return st.Free >= 9 })
	w.cloud.SetFault("", sim.Fault{ErrorRate: 1, Code: "InternalError"})
	ctx := context.Background()
	for i := range 9 {
		if _, err := a.Add(ctx, key(i), pod(i)); err != nil {
			t.Fatal(err)
		}
	}
	a.reconcile(ctx, true)
	if ready, conds := a.ready.get(); ready {
		t.Fatalf("ready with no address and EC2 failing: %+v", conds)
	}
	w.cloud.SetFault("", sim.Fault{})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		a.reconcile(ctx, true)
		if ready, _ := a.ready.get(); ready {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, conds := a.ready.get()
	t.Fatalf("not ready again after EC2 recovered: %s", failing(conds))
}
