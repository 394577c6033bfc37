package kubetest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Shared is one cluster for a whole test binary, started by the first test
// that asks for it and stopped when the tests end, so a package's tests
// pay for one apiserver start. Tests sharing it should each work in their
// own namespace and name cluster-scoped objects uniquely. The zero value is
// ready to use:
//
//	var kube kubetest.Shared
//
//	func TestMain(m *testing.M) { os.Exit(kube.Run(m)) }
//
//	func TestX(t *testing.T) { c := kube.Cluster(t); ... }
type Shared struct {
	once    sync.Once
	cluster *Cluster
	skip    bool
	err     error
}

// Run runs the tests and then stops the cluster, if one was started; its
// result is the exit code for os.Exit.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	if s.cluster != nil {
		if err := s.cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Cluster returns the shared cluster, starting it on first use. Like Start,
// it skips the test when VPCNET_KUBE_APISERVER is unset (fails it when
// CI=true); when the cluster
// could not start, every test that asks for it fails with the reason.
func (s *Shared) Cluster(t testing.TB) *Cluster {
	t.Helper()
	s.once.Do(func() {
		opts, ok, err := OptionsFromEnv()
		if !ok {
			s.skip = true
			return
		}
		if err != nil {
			s.err = err
			return
		}
		// Not the test's context: the cluster outlives the first test.
		s.cluster, s.err = New(context.Background(), opts)
	})
	if s.skip {
		skipWithoutAPIServer(t)
	}
	if s.err != nil {
		t.Fatalf("kubetest: %v", s.err)
	}
	return s.cluster
}
