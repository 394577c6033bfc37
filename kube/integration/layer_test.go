package integration

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/internal/testlog"
	"github.com/vpcnet/vpcnet/kube"
)

// waitTimeout bounds every wait for the layer to notice something: far
// more than it needs (informers see a change in milliseconds), so only a
// real failure times out, even with -race on a busy machine.
const waitTimeout = 30 * time.Second

// layer is the Kubernetes layer running as vpcnetd runs it.
type layer struct {
	*kube.Client
	reqs *requestLog
	done chan struct{}
}

// startLayer runs the layer with the agent's settings given as its
// environment variables (as the DaemonSet sets them; the rest take their
// defaults, as in vpcnetd), authenticated by rc, until the test ends.
// tweak, if not nil, adjusts the options before the layer is built.
func startLayer(t *testing.T, rc *rest.Config, inst agent.Instance, settings map[string]string, tweak func(*kube.Options)) *layer {
	t.Helper()
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := settings[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	reqs := &requestLog{}
	rc = rest.CopyConfig(rc)
	rc.Wrap(reqs.wrap)
	o := kube.Options{
		NodeName: cfg.NodeName, CustomNetwork: cfg.CustomNetwork,
		ENIConfigAnnotation: cfg.ENIConfigAnnotation, ENIConfigLabel: cfg.ENIConfigLabel,
		StartupTaint: cfg.StartupTaint, Source: "kubetest service account token", Logger: testLogger(t),
		// Retries and probes quick enough for a test; the defaults
		// (30 s, 10 s) are for thousands of nodes.
		RetryInterval: 200 * time.Millisecond, ProbeInterval: 200 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&o)
	}
	k, err := kube.NewForConfig(rc, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &layer{Client: k, reqs: reqs, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		if err := k.Run(ctx, inst, func() {}); err != nil {
			t.Errorf("Run = %v, want nil: it must wait out any API server trouble", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	return l
}

// waitFor polls the layer's state until cond holds, and fails the test
// with the last state when it never does.
func (l *layer) waitFor(t *testing.T, what string, cond func(agent.KubeState) bool) agent.KubeState {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		st := l.State()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %s within %v; last state: %+v", what, waitTimeout, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running says Run has not returned.
func (l *layer) running() bool {
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

func nodeFound(st agent.KubeState) bool { return st.Node != "" }

// testLogger logs into the test until it ends.
func testLogger(t *testing.T) *slog.Logger { return testlog.New(t, slog.LevelDebug) }
