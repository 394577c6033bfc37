package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/introspect"
)

// noCloud leaves out every source that would reach past the test: the
// machine's own IMDS, EC2, an API server.
const noCloud = "imds,ec2,kubernetes"

func TestDoctorUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"doctor", "-o", "yaml"},
		{"doctor", "extra"},
		{"doctor", "--skip", "agent,dns"},
		{"doctor", "--no-such-flag"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"doctor", "--help"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "-cni-conf-dir") {
		t.Errorf("doctor --help: exit %d\n%s", code, errb.String())
	}
}

// With every source left out doctor still answers: the sources it did
// not read, no finding, exit 0.
func TestDoctorWithEverySourceSkippedSaysSo(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"doctor", "--skip", "agent,checkpoint,host,cni," + noCloud}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"agent       NO    not read: skipped", "kubernetes  NO    not read: skipped", "no finding"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// An agent that runs on observed limits: doctor prints the finding with
// its fix and exits 1; -o json carries the same.
func TestDoctorErrorFindingExits1(t *testing.T) {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/status":
			json.NewEncoder(w).Encode(introspect.Status{Ready: true, InstanceType: "x9.big", MaxENIs: 1, IPv4PerENI: 2,
				LimitsSource: "observed (instance type x9.big unknown: UnauthorizedOperation)"})
		case "/v1/config":
			json.NewEncoder(w).Encode([]introspect.Setting{{Name: "CLUSTER_NAME", Value: "c"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer agent.Close()
	args := []string{"doctor", "--agent", agent.URL, "--skip", "checkpoint,host,cni," + noCloud}

	var out, errb bytes.Buffer
	if code := run(t.Context(), args, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "ERROR [limits-unknown]") || !strings.Contains(out.String(), "fix: allow ec2:DescribeInstanceTypes") {
		t.Errorf("table output:\n%s", out.String())
	}

	out.Reset()
	if code := run(t.Context(), append(args, "-o", "json"), &out, &errb); code != 1 {
		t.Fatalf("-o json: exit %d, want 1", code)
	}
	var rep struct {
		Findings []struct{ ID, Severity string }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Findings) != 1 || rep.Findings[0].ID != "limits-unknown" {
		t.Errorf("-o json: %v %+v\n%s", err, rep, out.String())
	}
}

// healthyNode is a node whose agent keeps its files away from the
// DaemonSet's paths, as every node of the local cloud does, and says so
// on /v1/config: a checkpoint, vpcnet's CNI configuration and a plugin
// that answers STATUS, each where the agent's settings name it.
func healthyNode(t *testing.T) (agentURL, dir string) {
	t.Helper()
	dir = t.TempDir()
	for rel, data := range map[string]string{
		"lib/checkpoint.json":      `{"version":"vpcnet/1","assignments":[],"released":[]}`,
		"net.d/10-vpcnet.conflist": `{"cniVersion":"1.1.0","name":"aws-cni","plugins":[{"type":"vpcnet"}]}`,
		"bin/vpcnet":               "#!/bin/sh\n[ \"$CNI_COMMAND\" = STATUS ] && exit 0\necho '{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"1.0.0\",\"1.1.0\"]}'\n",
		"aws-node/.keep":           "",
	} {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	settings := []introspect.Setting{
		{Name: "VPCNET_STATE_DIR", Value: filepath.Join(dir, "lib")},
		{Name: "VPCNET_CNI_CONF_DIR", Value: filepath.Join(dir, "net.d")},
		{Name: "VPCNET_CNI_BIN_DIR", Value: filepath.Join(dir, "bin")},
		{Name: "VPCNET_AWS_VPC_CNI_CHECKPOINT", Value: filepath.Join(dir, "aws-node", "ipam.json")},
		{Name: "VPCNET_EC2_ENDPOINT", Value: "http://127.0.0.1:8780"},
	}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/status":
			json.NewEncoder(w).Encode(readyStatus())
		case "/v1/config":
			json.NewEncoder(w).Encode(settings)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(agent.Close)
	return agent.URL, dir
}

// Issue 24: doctor run inside a local-cloud node read the DaemonSet's
// paths, not the agent's, and reported a checkpoint behind the host and
// the CNI configuration and plugin missing on a healthy node (exit 1).
// It reads where the agent says it keeps them.
func TestDoctorReadsTheAgentsOwnPaths(t *testing.T) {
	agent, dir := healthyNode(t)
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"doctor", "--agent", agent, "--skip", "host," + noCloud}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d on a healthy node, want 0\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"checkpoint  yes   " + filepath.Join(dir, "lib", "checkpoint.json") + ": 0 entries",
		"cni         yes   " + filepath.Join(dir, "net.d") + ": 10-vpcnet.conflist",
		"no finding",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// A flag still wins over the agent's setting, and doctor says that what
// it read is not what the agent uses.
func TestDoctorSaysWhenAFlagSendsItElsewhereThanTheAgent(t *testing.T) {
	agent, dir := healthyNode(t)
	elsewhere := t.TempDir()
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"doctor", "--agent", agent, "--skip", "host," + noCloud, "--cni-conf-dir", elsewhere}, &out, &errb)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (no configuration where the flag points)\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"ERROR [cni-config-missing] no vpcnet CNI configuration in " + elsewhere,
		"WARNING [paths-differ-from-agent]",
		"evidence: --cni-conf-dir " + elsewhere + ", but the agent's VPCNET_CNI_CONF_DIR is " + filepath.Join(dir, "net.d"),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
