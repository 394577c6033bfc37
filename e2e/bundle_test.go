package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/simcluster"
)

// bundleNode is one m5.large node.
const bundleNode = `
  - {id: i-a, type: m5.large, subnet: subnet-a}`

// vpcnetctl status and version, and a support bundle, run on a demo node
// as an operator would (in the node's network namespace), once with the
// agent serving and once with it stopped: status exits 0 then 3; both
// bundles open and list every part, and the second says the agent's parts
// could not be collected.
func TestVpcnetctlOnANodeWithItsAgentUpAndDown(t *testing.T) {
	c := startCluster(t, bundleNode, nil)
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := n.AddPod(ctx, "bundled"); err != nil {
		t.Fatal(err)
	}

	if code, out := ctlOnNode(t, n, "status"); code != 0 || !strings.Contains(out, "ready:") {
		t.Errorf("vpcnetctl status on a ready node: exit %d\n%s", code, out)
	}
	if code, out := ctlOnNode(t, n, "version"); code != 0 || !strings.Contains(out, "(same build)") {
		t.Errorf("vpcnetctl version beside the agent it was built with: exit %d\n%s", code, out)
	}
	up := takeBundle(t, n)
	for _, part := range []string{"agent/v1-status.json", "agent/v1-enis.json", "agent/v1-pods.json", "agent/v1-config.json", "agent/readyz.json", "agent/metrics.txt", "checkpoint/checkpoint.json", "host/ip-route-all.json", "host/nft-ruleset.json", "cni/plugins.txt"} {
		if got := up.manifest[part]; got != "ok" {
			t.Errorf("agent up: %s is %q, want ok\nMANIFEST:\n%s", part, got, up.files["MANIFEST"])
		}
	}
	if !strings.Contains(up.files["host/ip-rule.json"], `"priority":512`) {
		t.Errorf("ip rules of the node lack vpcnet's priority 512 rule for the pod:\n%s", up.files["host/ip-rule.json"])
	}
	if !strings.Contains(up.files["cni/plugins.txt"], "vpcnet: VPC-native pod networking") {
		t.Errorf("cni/plugins.txt lacks the vpcnet plugin's about line:\n%s", up.files["cni/plugins.txt"])
	}
	if strings.Contains(up.files["agent/v1-config.json"], `"value":"sim"`) || strings.Contains(up.files["logs/00-vpcnetd.log"], "AWS_SECRET_ACCESS_KEY=sim") {
		t.Error("the bundle carries the node's AWS secret key")
	}

	if err := n.StopAgent(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code, out := ctlOnNode(t, n, "status"); code != 3 {
		t.Errorf("vpcnetctl status with the agent stopped: exit %d, want 3\n%s", code, out)
	}
	down := takeBundle(t, n)
	for part := range up.manifest {
		if _, ok := down.manifest[part]; !ok {
			t.Errorf("agent down: the MANIFEST does not list %s", part)
		}
	}
	for _, part := range []string{"agent/v1-status.json", "agent/metrics.txt"} {
		if got := down.manifest[part]; !strings.HasPrefix(got, "error: ") {
			t.Errorf("agent down: %s is %q, want an error", part, got)
		}
	}
	for _, part := range []string{"logs/00-vpcnetd.log", "checkpoint/checkpoint.json", "host/ip-route-all.json"} {
		if got := down.manifest[part]; got != "ok" {
			t.Errorf("agent down: %s is %q, want ok", part, got)
		}
	}
}

// ctlOnNode runs vpcnetctl in the node's namespace and returns its exit
// code and output.
func ctlOnNode(t *testing.T, n *simcluster.Node, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "vpcnetctl"), args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := fabric.Do(n.NetNS, cmd.Run)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatalf("vpcnetctl %v in %s: %v", args, n.NetNS, err)
	}
	return 0, out.String()
}

type openedBundle struct {
	files    map[string]string
	manifest map[string]string
}

// takeBundle runs `vpcnetctl bundle` in the node's namespace with the
// node's paths, and opens what it wrote.
func takeBundle(t *testing.T, n *simcluster.Node) openedBundle {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "bundle.tar.gz")
	// The node's /opt/cni/bin: the plugins only (binDir also holds
	// vpcnetd, which the bundle would start as it runs each plugin).
	cniBin := filepath.Join(dir, "cni-bin")
	if err := os.Mkdir(cniBin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"vpcnet", "portmap"} {
		if err := os.Symlink(filepath.Join(binDir, p), filepath.Join(cniBin, p)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "vpcnetctl"), "bundle", "-o", out,
		"--agent-log", n.AgentLog(), "--checkpoint", filepath.Join(n.Dir, "lib", "checkpoint.json"),
		"--cni-conf-dir", n.ConfDir(), "--cni-bin-dir", cniBin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := fabric.Do(n.NetNS, cmd.Run); err != nil {
		t.Fatalf("vpcnetctl bundle in %s: %v\n%s%s", n.NetNS, err, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), "wrote "+out) {
		t.Errorf("vpcnetctl bundle printed %q, want the file and its size", &stdout)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b := openedBundle{files: map[string]string{}, manifest: map[string]string{}}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		b.files[hdr.Name] = string(data)
	}
	for _, line := range strings.Split(b.files["MANIFEST"], "\n") {
		if f := strings.Split(line, "\t"); len(f) == 3 && !strings.HasPrefix(line, "#") {
			b.manifest[f[0]] = f[1]
			if f[1] != "ok" && !strings.HasPrefix(f[1], "error: ") && f[1] != "truncated" {
				t.Errorf("MANIFEST line %q has no status", line)
			}
			if f[1] == "ok" {
				if _, ok := b.files[f[0]]; !ok {
					t.Errorf("MANIFEST says %s is ok, the bundle lacks it", f[0])
				}
			}
		}
	}
	if len(b.manifest) == 0 {
		t.Fatalf("no MANIFEST in the bundle; files: %v", keys(b.files))
	}
	return b
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
