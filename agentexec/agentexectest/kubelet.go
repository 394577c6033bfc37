// Package agentexectest is a kubelet's exec endpoint for tests that run
// an exec through a real API server with no kubelet (internal/kubetest).
package agentexectest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// Kubelet is the exec endpoint of a kubelet, enough for the API
// server to carry an exec to it: it speaks the SPDY remote command
// protocol (v4, which the API server uses towards kubelets, translating a
// WebSocket client's stream), records what it was asked to run, and
// answers with fixed output and exit code.
type Kubelet struct {
	srv    *httptest.Server
	stdout string
	code   int

	mu sync.Mutex // guards calls
	// calls are "NAMESPACE/POD/CONTAINER: ARGV..." of each exec.
	calls []string
}

// NewKubelet serves exec on a TLS listener on loopback until the test
// ends. Each exec prints stdout and exits with code.
func NewKubelet(t testing.TB, stdout string, code int) *Kubelet {
	k := &Kubelet{stdout: stdout, code: code}
	k.srv = httptest.NewTLSServer(http.HandlerFunc(k.serve))
	t.Cleanup(k.srv.Close)
	return k
}

// Port is the kubelet port to put in the Node's status
// (daemonEndpoints.kubeletEndpoint.port), with InternalIP 127.0.0.1.
func (k *Kubelet) Port(t testing.TB) int32 {
	t.Helper()
	_, p, _ := strings.Cut(strings.TrimPrefix(k.srv.URL, "https://"), ":")
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// Execs are the execs asked for, each "NAMESPACE/POD/CONTAINER: ARGV...".
func (k *Kubelet) Execs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

func (k *Kubelet) serve(w http.ResponseWriter, r *http.Request) {
	// /exec/NAMESPACE/POD/CONTAINER?command=...&command=...
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if len(parts) != 4 || parts[0] != "exec" {
		http.Error(w, "fake kubelet serves only exec", http.StatusNotFound)
		return
	}
	k.mu.Lock()
	k.calls = append(k.calls, strings.Join(parts[1:], "/")+": "+strings.Join(r.URL.Query()["command"], " "))
	k.mu.Unlock()

	if _, err := httpstream.Handshake(r, w, []string{"v4.channel.k8s.io"}); err != nil {
		return // Handshake answered
	}
	streams := make(chan httpstream.Stream, 4)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
		streams <- s
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	conn.SetIdleTimeout(time.Minute)
	// The client opens error, stdout and stderr (no stdin, no tty).
	byType := map[string]httpstream.Stream{}
	timeout := time.After(10 * time.Second)
	for len(byType) < 3 {
		select {
		case s := <-streams:
			byType[s.Headers().Get("streamType")] = s
		case <-timeout:
			return
		}
	}
	_, _ = byType["stdout"].Write([]byte(k.stdout))
	status := metav1.Status{Status: metav1.StatusSuccess}
	if k.code != 0 {
		status = metav1.Status{
			Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
			Message: "command terminated with non-zero exit code",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: strconv.Itoa(k.code)}}},
		}
	}
	b, _ := json.Marshal(status)
	_, _ = byType["error"].Write(b)
	for _, s := range byType {
		s.Close()
	}
}
