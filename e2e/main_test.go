// Package e2e runs vpcnet end to end on the local cloud: the real vpcnetd
// and vpcnet binaries inside the fabric's node namespaces, pods created
// through libcni, traffic across a VPC that enforces EC2's
// source/destination check.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vpcnet/vpcnet/simcluster"
)

// binDir holds vpcnetd, vpcnet, vpcnet-egress-v4, vpcnetctl and the
// reference portmap, bandwidth and host-local plugins, built once for
// every test.
var binDir string

// stateRoot holds every test cluster's state directory (stateDir).
var stateRoot string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipped, needs root to create network namespaces")
		os.Exit(0)
	}
	root, err := os.MkdirTemp("", "vpcnet-e2e-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stateRoot = root
	removeOnInterrupt(root)
	code := run(m)
	os.RemoveAll(root)
	os.Exit(code)
}

func run(m *testing.M) int {
	// VPCNET_BIN_DIR reuses binaries already built (make build-sim).
	if dir := os.Getenv("VPCNET_BIN_DIR"); dir != "" {
		binDir = dir
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "vpcnet-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	return m.Run()
}

// stateDir is a new state directory for one test's local cloud, removed
// when the test ends (after the cluster, whose cleanup registers later).
// It lives under stateRoot, where an interrupted run finds it.
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(stateRoot, "cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// removeOnInterrupt removes, when the run is interrupted (SIGINT,
// SIGTERM), what every local cloud under root recorded: its namespaces
// and agents. A signalled test binary runs no t.Cleanup, and an
// interrupted IPv6 test once left 161 namespaces behind.
func removeOnInterrupt(root string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "e2e: %v: removing the local clouds of the tests under way\n", s)
		if err := simcluster.RemoveRecordedUnder(root); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		}
		os.RemoveAll(root)
		os.Exit(1)
	}()
}

// build compiles the binaries the way `make build-sim` does.
func build(dir string) error {
	steps := [][]string{
		{"go", "build", "-o", dir + "/", "../cmd/vpcnetd", "../cmd/vpcnet", "../cmd/vpcnet-egress-v4", "../cmd/vpcnetctl"},
		{"go", "install", "github.com/containernetworking/plugins/plugins/meta/portmap@v1.9.1",
			"github.com/containernetworking/plugins/plugins/meta/bandwidth@v1.9.1",
			"github.com/containernetworking/plugins/plugins/ipam/host-local@v1.9.1"},
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %v\n%s", s, err, out)
		}
	}
	for _, b := range []string{"vpcnetd", "vpcnet", "vpcnet-egress-v4", "vpcnetctl", "portmap", "bandwidth", "host-local"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	return nil
}
