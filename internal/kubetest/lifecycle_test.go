package kubetest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// stubTB records how a test ended; Skip and Fatal end the goroutine as
// testing.T's do.
type stubTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (s *stubTB) Helper() {}
func (s *stubTB) Skip(args ...any) {
	s.skipped, s.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (s *stubTB) Fatal(args ...any) {
	s.failed, s.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

func TestWithoutAPIServerSkipsExceptOnCI(t *testing.T) {
	tests := []struct {
		ci         string
		wantFailed bool
	}{
		{ci: "", wantFailed: false},
		{ci: "true", wantFailed: true},
	}
	for _, tt := range tests {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Setenv(EnvAPIServer, "")
			t.Setenv("CI", tt.ci)
			for name, start := range map[string]func(testing.TB){
				"Start":  func(tb testing.TB) { Start(t.Context(), tb) },
				"Shared": func(tb testing.TB) { new(Shared).Cluster(tb) },
			} {
				stub := &stubTB{}
				done := make(chan struct{})
				go func() {
					defer close(done)
					start(stub)
				}()
				<-done
				if stub.failed != tt.wantFailed || stub.skipped == tt.wantFailed {
					t.Errorf("%s: skipped %v, failed %v; want failed %v", name, stub.skipped, stub.failed, tt.wantFailed)
				}
				if !strings.Contains(stub.msg, "hack/kube-apiserver.sh") {
					t.Errorf("%s: message %q does not say how to get the apiserver", name, stub.msg)
				}
			}
		})
	}
}

// A server that dies during start is reported with its log, and nothing
// is left behind.
func TestNewReportsServerThatExits(t *testing.T) {
	opts, ok, err := OptionsFromEnv()
	if !ok || err != nil {
		t.Skipf("needs etcd: %v", err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	opts.APIServer = "/bin/false"
	_, err = New(t.Context(), opts)
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver exited early (exit status 1)") {
		t.Fatalf("New with an apiserver that exits: got %v, want it reported", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("failed start left %v in the temp dir", left)
	}
}

func TestStopKillsServersAndRemovesDir(t *testing.T) {
	var c *Cluster
	t.Run("cluster", func(t *testing.T) {
		c = Start(t.Context(), t)
	})
	if c == nil {
		t.Skip("no cluster started")
	}
	for _, p := range []*process{c.etcd, c.apiserver} {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s still running after the test's cleanup", p.name)
		}
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still there after cleanup: %v", c.Dir(), err)
	}
}
