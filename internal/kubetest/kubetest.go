// Package kubetest runs a real etcd and kube-apiserver, with RBAC on, for
// tests that need a Kubernetes API server: applying manifests, running the
// agent's Kubernetes layer under its own service account, checking that a
// missing permission fails the way an operator would see it.
//
// The apiserver binary comes from hack/kube-apiserver.sh (built once from
// the Go module proxy, then cached) through VPCNET_KUBE_APISERVER; etcd is
// Debian's etcd-server package. Without VPCNET_KUBE_APISERVER the tests
// skip, except with CI=true where they fail; `make test` always sets it.
//
// No controllers run: no kube-controller-manager, scheduler or kubelet.
// Objects are stored and served, RBAC and admission apply, but Deployments
// make no Pods, namespaces get no "default" ServiceAccount (CreateNamespace
// makes one) and deleted namespaces stay Terminating.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

const (
	// EnvAPIServer names the kube-apiserver binary the tests run.
	EnvAPIServer = "VPCNET_KUBE_APISERVER"
	// EnvEtcd optionally names the etcd binary; by default etcd is found
	// on PATH.
	EnvEtcd = "VPCNET_ETCD"
	// EnvKeep, when set to 1, keeps each cluster's directory (logs, etcd
	// data, certificates) after the test and prints where it is (shown
	// with go test -v).
	EnvKeep = "VPCNET_KUBETEST_KEEP"
)

// howToGetAPIServer is the remedy quoted when the binaries are missing.
const howToGetAPIServer = "run `make kubetest`, or `export " + EnvAPIServer +
	"=$(hack/kube-apiserver.sh)` (builds kube-apiserver once, 8 to 10 minutes, then cached) " +
	"and `apt-get install etcd-server`"

// Options says which binaries to run and how.
type Options struct {
	// APIServer and Etcd are paths to the binaries.
	APIServer string
	Etcd      string
	// ExtraAPIServerArgs are appended to the apiserver's flags (for
	// example "--feature-gates=..."); a single-valued flag given again
	// overrides the default.
	ExtraAPIServerArgs []string
	// StartTimeout bounds the wait for /readyz; zero means 2 minutes.
	StartTimeout time.Duration
	// Keep leaves the cluster's directory in place after Stop.
	Keep bool
}

// OptionsFromEnv reads the binaries' paths from the environment. ok is
// false when VPCNET_KUBE_APISERVER is unset, the one case where tests
// should skip rather than fail.
func OptionsFromEnv() (opts Options, ok bool, err error) {
	opts.APIServer = os.Getenv(EnvAPIServer)
	if opts.APIServer == "" {
		return Options{}, false, nil
	}
	opts.Keep = os.Getenv(EnvKeep) == "1"
	opts.Etcd = os.Getenv(EnvEtcd)
	if opts.Etcd == "" {
		if opts.Etcd, err = exec.LookPath("etcd"); err != nil {
			return Options{}, true, fmt.Errorf("etcd not found on PATH (%w): `apt-get install etcd-server`, or set %s", err, EnvEtcd)
		}
	}
	return opts, true, nil
}

// Cluster is a running etcd and kube-apiserver on loopback.
type Cluster struct {
	dir       string
	keep      bool
	etcd      *process
	apiserver *process
	pki       *pki
	host      string // https://127.0.0.1:port
}

// Start runs a cluster for one test, stopped by t.Cleanup whether the test
// passes or fails. It skips the test when VPCNET_KUBE_APISERVER is unset
// (fails it when CI=true) and fails it when the cluster cannot start. ctx
// bounds only the start. A test package with several tests should share
// one cluster: see Shared.
func Start(ctx context.Context, t testing.TB) *Cluster {
	t.Helper()
	opts, ok, err := OptionsFromEnv()
	if !ok {
		skipWithoutAPIServer(t)
	}
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	c, err := New(ctx, opts)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("kubetest: %v", err)
		}
	})
	return c
}

// skipWithoutAPIServer skips the test, except on CI, where a missing
// apiserver is a broken setup that must not pass as a green run.
func skipWithoutAPIServer(t testing.TB) {
	t.Helper()
	msg := EnvAPIServer + " is not set, so the Kubernetes API server tests cannot run: " + howToGetAPIServer
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: failing instead of skipping)")
	}
	t.Skip(msg)
}

// New starts etcd and kube-apiserver and returns once /readyz says ok. The
// processes outlive ctx, which bounds only the start; the caller must call
// Stop.
func New(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.APIServer == "" || opts.Etcd == "" {
		return nil, fmt.Errorf("kubetest needs both binaries (apiserver %q, etcd %q): %s", opts.APIServer, opts.Etcd, howToGetAPIServer)
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	removeStale(os.TempDir())
	dir, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	c := &Cluster{dir: dir, keep: opts.Keep}
	if err := claimDir(dir); err != nil {
		return nil, errors.Join(fmt.Errorf("create cluster directory: %w", err), c.Stop())
	}
	if err := c.start(ctx, opts); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, opts Options) error {
	var err error
	if c.pki, err = newPKI(time.Now()); err != nil {
		return err
	}
	files, err := c.pki.write(c.dir)
	if err != nil {
		return err
	}
	var etcdURL string
	if c.etcd, etcdURL, err = startEtcd(c.dir, opts.Etcd); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	c.host = "https://127.0.0.1:" + strconv.Itoa(port)
	args := append(apiserverArgs(port, etcdURL, files), opts.ExtraAPIServerArgs...)
	if c.apiserver, err = startProcess("kube-apiserver", c.dir, opts.APIServer, args...); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

// Stop kills both servers and removes the cluster's directory (unless
// Options.Keep). It is safe to call more than once.
func (c *Cluster) Stop() error {
	for _, p := range []*process{c.apiserver, c.etcd} {
		if p != nil {
			p.kill()
		}
	}
	if c.keep {
		// Unclaimed, so the next run's removeStale leaves it alone.
		_ = os.Remove(filepath.Join(c.dir, ownerFile))
		fmt.Fprintf(os.Stderr, "kubetest: kept cluster directory %s (logs, etcd data, certificates)\n", c.dir)
		return nil
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("remove cluster directory: %w", err)
	}
	return nil
}

// Dir is the cluster's directory: etcd.log and kube-apiserver.log are there.
func (c *Cluster) Dir() string { return c.dir }

// LogTail returns the last n lines of the apiserver's log, for a failing
// test to show what the server said.
func (c *Cluster) LogTail(n int) string { return c.apiserver.tail(n) }
