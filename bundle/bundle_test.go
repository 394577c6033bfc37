package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeNode is a node's files and commands in a temporary directory, and
// an agent serving introspection and metrics unless down.
type fakeNode struct {
	opts Options
	ran  []string
}

func newFakeNode(t *testing.T, agentUp bool) *fakeNode {
	t.Helper()
	dir := t.TempDir()
	n := &fakeNode{}
	write := func(rel, content string, mode os.FileMode) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	log := write("vpcnetd.log", `{"level":"INFO","msg":"ready"}`+"\n"+`{"msg":"kube","header":"Authorization: Bearer sekrit-token-1"}`+"\n", 0o600)
	cp := write("lib/checkpoint.json", `{"version":1,"assignments":[{"address":"10.0.0.11"}]}`, 0o600)
	write("net.d/10-vpcnet.conflist", `{"cniVersion":"1.0.0","name":"aws-cni","plugins":[{"type":"vpcnet"}]}`, 0o644)
	write("bin/vpcnet", "#!/bin/sh\nif [ \"$CNI_COMMAND\" = VERSION ]; then echo '{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"1.1.0\"]}'; exit 0; fi\necho 'vpcnet: test plugin version v9.9.9' >&2; exit 0\n", 0o755)
	n.opts = Options{
		AgentLogs: []string{log}, Checkpoint: cp,
		CNIConfDir: filepath.Join(dir, "net.d"), CNIBinDir: filepath.Join(dir, "bin"),
		Self: "/nonexistent/vpcnetctl",
	}
	n.opts.Run = func(ctx context.Context, name string, args []string, env []string) ([]byte, []byte, error) {
		n.ran = append(n.ran, name+" "+strings.Join(args, " "))
		switch {
		case name == "ip" || name == "nft":
			return []byte(`[{"ifname":"eth0"}]`), nil, nil
		case name == n.opts.Self:
			return nil, nil, errors.New(`vpcnetctl doctor: exit status 2: unknown command "doctor"`)
		case strings.HasPrefix(name, dir):
			return RunCommand(ctx, name, args, env) // the fake plugin, for real
		}
		return nil, nil, errors.New(name + ": executable file not found in $PATH")
	}
	if agentUp {
		mux := http.NewServeMux()
		for _, p := range agentPaths {
			mux.HandleFunc("GET "+p.path, func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path, "token": "sekrit-token-2"})
			})
		}
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "vpcnet_addresses{state=\"free\"} 4\n")
		})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		n.opts.Agent, n.opts.Metrics = srv.URL, srv.URL
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n.opts.Agent, n.opts.Metrics = ln.Addr().String(), ln.Addr().String()
		ln.Close()
	}
	return n
}

// openBundle reads every file of a bundle and its MANIFEST's statuses.
func openBundle(t *testing.T, data []byte) (files map[string]string, manifest map[string]string) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("bundle is not gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	files = map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("bundle is not a tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = string(b)
	}
	manifest = map[string]string{}
	for _, line := range strings.Split(files[ManifestName], "\n")[2:] {
		if f := strings.Split(line, "\t"); len(f) == 3 {
			manifest[f[0]] = f[1]
		}
	}
	return files, manifest
}

func takeBundle(t *testing.T, o Options, total int) ([]byte, []Entry) {
	t.Helper()
	var buf bytes.Buffer
	a := NewArchive(&buf, time.Now(), 0, total)
	if err := Collect(context.Background(), a, o); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), a.Entries()
}

// wantParts are the parts every bundle lists, collected or not.
var wantParts = []string{
	"versions/vpcnetctl.json",
	"agent/v1-status.json", "agent/v1-enis.json", "agent/v1-pods.json", "agent/v1-config.json",
	"agent/readyz.json", "agent/healthz.txt", "agent/metrics.txt",
	"logs/00-vpcnetd.log", "checkpoint/checkpoint.json",
	"host/ip-link.json", "host/ip-addr.json", "host/ip-rule.json", "host/ip-neigh.json", "host/ip-route-all.json",
	"host/nft-ruleset.json", "host/iptables-save.txt",
	"cni/net.d/10-vpcnet.conflist", "cni/plugins.txt", "doctor.json",
}

func TestABundleListsEveryPartWithItsStatus(t *testing.T) {
	tests := []struct {
		name      string
		agentUp   bool
		wantError []string // parts recorded as errors; every other part is ok
	}{
		{"agent up", true, []string{"host/iptables-save.txt", "doctor.json"}},
		{"agent down", false, []string{"agent/v1-status.json", "agent/v1-enis.json", "agent/v1-pods.json", "agent/v1-config.json",
			"agent/readyz.json", "agent/healthz.txt", "agent/metrics.txt", "host/iptables-save.txt", "doctor.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newFakeNode(t, tt.agentUp)
			data, _ := takeBundle(t, n.opts, 0)
			files, manifest := openBundle(t, data)
			for _, p := range wantParts {
				status, ok := manifest[p]
				if !ok {
					t.Errorf("MANIFEST does not list %s:\n%s", p, files[ManifestName])
					continue
				}
				wantErr := contains(tt.wantError, p)
				if gotErr := strings.HasPrefix(status, "error: "); gotErr != wantErr {
					t.Errorf("%s: status %q, want an error: %v", p, status, wantErr)
				}
				if status == "ok" {
					if _, ok := files[p]; !ok {
						t.Errorf("%s is ok in the MANIFEST but not in the bundle", p)
					}
				}
			}
			if !tt.agentUp && !strings.Contains(manifest["agent/v1-status.json"], "not reachable") {
				t.Errorf("agent/v1-status.json status %q does not say the agent is not reachable", manifest["agent/v1-status.json"])
			}
			if !strings.Contains(manifest["doctor.json"], `unknown command "doctor"`) {
				t.Errorf("doctor.json status %q does not carry doctor's error", manifest["doctor.json"])
			}
			if !strings.Contains(files["cni/plugins.txt"], "test plugin version v9.9.9") || !strings.Contains(files["cni/plugins.txt"], `"supportedVersions"`) {
				t.Errorf("cni/plugins.txt lacks the plugin's VERSION answer and about line:\n%s", files["cni/plugins.txt"])
			}
			for name, content := range files {
				if strings.Contains(content, "sekrit-token") {
					t.Errorf("%s carries a token:\n%s", name, content)
				}
			}
		})
	}
}

func TestABundleStaysWithinItsSizeLimit(t *testing.T) {
	n := newFakeNode(t, true)
	big := filepath.Join(t.TempDir(), "big.log")
	if err := os.WriteFile(big, bytes.Repeat([]byte("a log line that repeats\n"), 20000), 0o600); err != nil {
		t.Fatal(err)
	}
	n.opts.AgentLogs = []string{big}
	n.opts.LogLimit = 64 << 10
	const total = 100 << 10
	data, entries := takeBundle(t, n.opts, total)
	files, manifest := openBundle(t, data)
	sum := 0
	for name, c := range files {
		if name != ManifestName {
			sum += len(c)
		}
	}
	if sum > total {
		t.Errorf("parts hold %d bytes, over the %d limit", sum, total)
	}
	if got := len(files["logs/00-big.log"]); got > 64<<10 || got == 0 {
		t.Errorf("the log part holds %d bytes, want its end within 64 KiB", got)
	}
	if _, ok := manifest["doctor.json"]; !ok || len(entries) != len(manifest) {
		t.Errorf("MANIFEST lists %d parts, the archive recorded %d", len(manifest), len(entries))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Issue 24: the bundle's doctor ran with none of the bundle's path flags
// and diagnosed the DaemonSet's paths while the bundle collected others.
// It is given the paths the bundle was told.
func TestTheBundlesDoctorReadsWhereTheBundleWasTold(t *testing.T) {
	n := newFakeNode(t, true)
	takeBundle(t, n.opts, 0)
	want := strings.Join([]string{n.opts.Self, "doctor", "-o", "json", "--agent", n.opts.Agent,
		"--checkpoint", n.opts.Checkpoint, "--cni-conf-dir", n.opts.CNIConfDir, "--cni-bin-dir", n.opts.CNIBinDir}, " ")
	if !contains(n.ran, want) {
		t.Errorf("doctor was not run as %q; ran:\n%s", want, strings.Join(n.ran, "\n"))
	}
}

// Told no paths, the bundle collects where the agent says it keeps its
// files (/v1/config), and its doctor, given no paths either, learns them
// from the agent the same way.
func TestABundleToldNoPathsCollectsTheAgentsOwn(t *testing.T) {
	n := newFakeNode(t, true)
	settings := []map[string]string{
		{"name": "VPCNET_STATE_DIR", "value": filepath.Dir(n.opts.Checkpoint)},
		{"name": "VPCNET_CNI_CONF_DIR", "value": n.opts.CNIConfDir},
		{"name": "VPCNET_CNI_BIN_DIR", "value": n.opts.CNIBinDir},
	}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(settings)
	}))
	t.Cleanup(agent.Close)
	n.opts.Agent = agent.URL
	n.opts.Checkpoint, n.opts.CNIConfDir, n.opts.CNIBinDir = "", "", ""
	data, _ := takeBundle(t, n.opts, 0)
	files, manifest := openBundle(t, data)
	for _, part := range []string{"checkpoint/checkpoint.json", "cni/net.d/10-vpcnet.conflist"} {
		if manifest[part] != "ok" {
			t.Errorf("%s: %q, want collected from the agent's own directory", part, manifest[part])
		}
	}
	if !strings.Contains(files["cni/plugins.txt"], "test plugin version v9.9.9") {
		t.Errorf("cni/plugins.txt does not list the plugin in the agent's VPCNET_CNI_BIN_DIR:\n%s", files["cni/plugins.txt"])
	}
	want := strings.Join([]string{n.opts.Self, "doctor", "-o", "json", "--agent", agent.URL}, " ")
	if !contains(n.ran, want) {
		t.Errorf("doctor was not run as %q (it learns the paths itself); ran:\n%s", want, strings.Join(n.ran, "\n"))
	}
}
