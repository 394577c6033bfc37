// Package e2e runs vpcnet end to end on the local cloud: the real vpcnetd
// and vpcnet binaries inside the fabric's node namespaces, pods created
// through libcni, traffic across a VPC that enforces EC2's
// source/destination check.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binDir holds vpcnetd, vpcnet, vpcnet-egress-v4, vpcnetctl and the
// reference portmap, bandwidth and host-local plugins, built once for
// every test.
var binDir string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipped, needs root to create network namespaces")
		os.Exit(0)
	}
	// VPCNET_BIN_DIR reuses binaries already built (make build-sim).
	if dir := os.Getenv("VPCNET_BIN_DIR"); dir != "" {
		binDir = dir
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "vpcnet-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		binDir = dir
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
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
