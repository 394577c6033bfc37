package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// Issue 24: aws-node's ENABLE_BANDWIDTH_PLUGIN=true chains the bandwidth
// plugin after its own (cmd/aws-vpc-cni); vpcnet's configuration does the
// same, and without the setting chains nothing.
func TestEnableBandwidthPluginChainsBandwidthInTheCNIConfig(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{nil, []string{"vpcnet"}},
		{map[string]string{"ENABLE_BANDWIDTH_PLUGIN": "true"}, []string{"vpcnet", "bandwidth"}},
	} {
		w := newWorld(t)
		n := w.node("i-node1", tc.env)
		a := n.start(t)
		a.waitReady(t)
		conf := waitConf(t, filepath.Join(n.env["VPCNET_CNI_CONF_DIR"], "10-vpcnet.conflist"))
		var got []string
		for _, p := range conf.Plugins {
			got = append(got, p.Type)
			if p.Type == "bandwidth" && !p.Capabilities["bandwidth"] {
				t.Errorf("bandwidth chained without the bandwidth capability: the runtime would not pass the pod's limits")
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("env %v: plugins %v, want %v", tc.env, got, tc.want)
		}
		a.stop()
	}
}

type conflist struct {
	Plugins []struct {
		Type         string          `json:"type"`
		Capabilities map[string]bool `json:"capabilities"`
	} `json:"plugins"`
}

// waitConf waits for the agent to write its CNI configuration and reads it.
func waitConf(t *testing.T, path string) conflist {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			var c conflist
			if err := json.Unmarshal(data, &c); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CNI configuration written: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Issue 24: AWS_MANAGE_ENIS_NON_SCHEDULABLE unset means what it means in
// aws-node: a cordoned node's pool is held (no address, no ENI), and its
// pods are told why; set to true, the pool grows as on any node.
func TestACordonedNodesPoolIsHeldUnlessManageENIsNonSchedulable(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		wantHold bool
	}{
		{map[string]string{"VPCNET_ADD_WAIT": "1s"}, true},
		{map[string]string{"VPCNET_ADD_WAIT": "1s", "AWS_MANAGE_ENIS_NON_SCHEDULABLE": "true"}, false},
	} {
		w := newWorld(t)
		k := newFakeKube(KubeState{Reachable: true, Node: "n"})
		n := w.node("i-node1", tc.env)
		n.kube = k
		a := n.start(t)
		a.waitReady(t)
		// m5.large: the primary ENI's 9 addresses meet WARM_ENI_TARGET=1.
		a.settle(t, func(st ipam.Stats) bool { return st.Total == 9 })
		k.set(func(st *KubeState) { st.Cordoned = true })
		waitView(t, a, "the cordon heard", func(v nodestate.View) bool { return v.CordonHold == tc.wantHold })
		ctx := context.Background()
		for i := range 9 {
			if _, err := a.Add(ctx, key(i), pod(i)); err != nil {
				t.Fatal(err)
			}
		}
		_, err := a.Add(ctx, key(9), pod(9))
		var noAddr *NoAddressError
		switch {
		case tc.wantHold && (!errors.As(err, &noAddr) || noAddr.Reason != ReasonCordoned || !strings.Contains(noAddr.Detail, "AWS_MANAGE_ENIS_NON_SCHEDULABLE=true")):
			t.Fatalf("tenth pod on a cordoned node: %v; want no address because the node is cordoned, naming the setting", err)
		case !tc.wantHold && err != nil:
			t.Fatalf("tenth pod with AWS_MANAGE_ENIS_NON_SCHEDULABLE=true: %v", err)
		}
		if got, want := w.callCount("CreateNetworkInterface") > 0, !tc.wantHold; got != want {
			t.Errorf("env %v: ENI created %t, want %t", tc.env, got, want)
		}
		if tc.wantHold {
			k.waitEvent(t, EventCordoned, pod(9))
			// Uncordoned, the pool grows again and the pod is served.
			k.set(func(st *KubeState) { st.Cordoned = false })
			if _, err := a.Add(ctx, key(9), pod(9)); err != nil {
				t.Fatalf("tenth pod once uncordoned: %v", err)
			}
		}
		a.stop()
	}
}

// waitView waits until the state machine's view satisfies cond.
func waitView(t *testing.T, a *running, what string, cond func(nodestate.View) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if v, _ := a.view(context.Background()); cond(v) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// Issue 24: the ENIs the agent creates carry the primary ENI's
// connection-tracking idle timeouts, as aws-node's do (v1.23), and none
// when the primary ENI has none.
func TestNewENIsCarryThePrimaryENIsConnectionTrackingTimeouts(t *testing.T) {
	for _, tc := range []struct {
		primary string // the instance's connectionTracking, in the topology
		want    cloud.ConnTrack
	}{
		{"", cloud.ConnTrack{}},
		{", connectionTracking: {tcpEstablishedTimeout: 3600, udpTimeout: 45}", cloud.ConnTrack{TCPEstablished: 3600, UDP: 45}},
	} {
		w := newWorldOf(t, strings.Replace(topology, "{id: i-node1, type: m5.large, subnet: subnet-a}",
			"{id: i-node1, type: m5.large, subnet: subnet-a"+tc.primary+"}", 1))
		a := w.node("i-node1", nil).start(t)
		a.waitReady(t)
		// The first pod makes the pool one ENI short.
		if _, err := a.Add(context.Background(), key(1), pod(1)); err != nil {
			t.Fatal(err)
		}
		a.settle(t, func(st ipam.Stats) bool { return len(st.ENIs) == 2 })
		enis := attached(t, a, "i-node1")
		if len(enis) != 2 || enis[0].ConnTrack != tc.want {
			t.Fatalf("primary ENI %+v, want timeouts %+v", enis, tc.want)
		}
		if got := enis[1].ConnTrack; got != tc.want {
			t.Errorf("primary %q: new ENI %s has timeouts %+v, want the primary's %+v", tc.primary, enis[1].ID, got, tc.want)
		}
		a.stop()
	}
}
