package deploy

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// helmVersion is the Helm the chart is tested with, built from source by
// the Go toolchain (no download outside the module proxy).
const helmVersion = "v3.22.0"

const chartDir = "../charts/vpcnet"

// helmBinary returns a helm binary: $VPCNET_HELM if set, else one built
// once per machine into the user's cache directory with `go install`
// (about four minutes the first time on two cores; instant afterwards).
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("VPCNET_HELM"); p != "" {
		return p
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go is not on PATH, so helm %s cannot be built: install Go or set VPCNET_HELM to a helm binary", helmVersion)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the helm binary (set VPCNET_HELM): %v", err)
	}
	dir := filepath.Join(cache, "vpcnet", "helm-"+helmVersion)
	bin := filepath.Join(dir, "helm")
	if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
		return bin
	}
	if testing.Short() {
		t.Skipf("-short: helm %s is not built yet (%s); run without -short to build it once", helmVersion, bin)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Build into a fresh directory and rename, so a concurrent or
	// interrupted build never leaves a partial binary at bin.
	tmp, err := os.MkdirTemp(dir, ".build-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	cmd := exec.Command(goBin, "install", "helm.sh/helm/v3/cmd/helm@"+helmVersion)
	cmd.Dir = tmp // outside this module: its go.mod must not steer helm's build
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build helm %s (set VPCNET_HELM to use a helm binary instead): %v\n%s", helmVersion, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built helm %s into %s in %s", helmVersion, bin, time.Since(start).Round(time.Second))
	return bin
}

// helmTemplate renders the chart into kube-system, CRDs included, with
// extra helm arguments (--set ...).
func helmTemplate(t *testing.T, helm string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := helmCmd(t, helm, append([]string{"template", "vpcnet", chartDir, "--namespace", namespace, "--include-crds"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template: %v: %s", err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// helmCmd is a helm command on the chart, kept away from the user's helm
// configuration.
func helmCmd(t *testing.T, helm string, args ...string) *exec.Cmd {
	t.Helper()
	readChart(t)
	home := t.TempDir()
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	return cmd
}

// readChart reads every file of the chart, so that `go test`'s cache,
// which sees only the files this process opens, reruns the chart tests
// when the chart changes.
func readChart(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir(chartDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		_, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestChartDefaultsRenderThePlainManifests(t *testing.T) {
	helm := helmBinary(t)
	rendered, err := helmTemplate(t, helm)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeObjects(rendered)
	if err != nil {
		t.Fatalf("chart output: %v", err)
	}
	want, err := decodeObjects(Manifests())
	if err != nil {
		t.Fatalf("vpcnet.yaml: %v", err)
	}
	byID := map[string]object{}
	for _, o := range got {
		byID[o.id] = o
	}
	for _, w := range want {
		g, ok := byID[w.id]
		if !ok {
			t.Errorf("the chart does not render %s", w.id)
			continue
		}
		delete(byID, w.id)
		if d := cmp.Diff(w.raw, g.raw); d != "" {
			t.Errorf("%s: chart (+) differs from deploy/vpcnet.yaml (-):\n%s", w.id, d)
		}
	}
	for id := range byID {
		t.Errorf("the chart renders %s, which deploy/vpcnet.yaml lacks", id)
	}
}

func TestChartPassesHelmLint(t *testing.T) {
	cmd := helmCmd(t, helmBinary(t), "lint", "--strict", "--namespace", namespace, chartDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}
