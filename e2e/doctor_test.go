package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/simcluster"
)

// doctorResult is one run of the built `vpcnetctl doctor`.
type doctorResult struct {
	report doctor.Report
	code   int
	out    string // the JSON, for failure messages
	stderr string
}

// runDoctor runs the built vpcnetctl doctor inside the node's namespace,
// where IMDS answers at 169.254.169.254 and the agent at its default
// address, as an operator would run it on the node: doctor learns the
// node's paths and EC2 endpoint from the agent's /v1/config. Its EC2
// credentials are not an instance's, so the local cloud lets it call
// every action, and the machine's own kubelet log is not the node's.
func runDoctor(t *testing.T, n *simcluster.Node, extra ...string) doctorResult {
	t.Helper()
	args := append([]string{"doctor", "-o", "json", "--timeout", "45s", "--kubelet-log", ""}, extra...)
	cmd := exec.Command(filepath.Join(binDir, "vpcnetctl"), args...)
	cmd.Env = []string{"AWS_ACCESS_KEY_ID=sim", "AWS_SECRET_ACCESS_KEY=sim", "HOME=/nonexistent"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := fabric.Do(n.NetNS, cmd.Start); err != nil {
		t.Fatalf("start vpcnetctl doctor in %s: %v", n.ID, err)
	}
	err := cmd.Wait()
	res := doctorResult{out: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("vpcnetctl doctor: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &res.report); err != nil {
		t.Fatalf("vpcnetctl doctor -o json (exit %d) printed no report: %v\nstdout:\n%s\nstderr:\n%s", res.code, err, stdout.String(), stderr.String())
	}
	return res
}

// nodePaths are doctor's flags for where the local cloud keeps the
// node's files and its EC2 endpoint: what an operator names when the
// agent, which would otherwise tell doctor, does not answer.
func nodePaths(n *simcluster.Node) []string {
	return []string{
		"--state-dir", filepath.Join(n.Dir, "lib"),
		"--cni-conf-dir", n.ConfDir(), "--cni-bin-dir", binDir,
		"--ec2-endpoint", "http://" + fabric.EC2Address,
		"--aws-node-checkpoint", filepath.Join(n.Dir, "aws-node", "ipam.json"),
	}
}

// finding returns the finding with id, failing the test with the whole
// report when there is none.
func (r doctorResult) finding(t *testing.T, id string) doctor.Finding {
	t.Helper()
	i := slices.IndexFunc(r.report.Findings, func(f doctor.Finding) bool { return f.ID == id })
	if i < 0 {
		t.Fatalf("doctor reports no %s (exit %d):\n%s%s", id, r.code, r.out, r.stderr)
	}
	return r.report.Findings[i]
}

// wantFinding asserts doctor names id with the given severity, evidence
// and fix text, and the exit status that goes with it.
func (r doctorResult) wantFinding(t *testing.T, id string, sev doctor.Severity, evidence, fix string) doctor.Finding {
	t.Helper()
	f := r.finding(t, id)
	if f.Severity != sev {
		t.Errorf("%s: severity %s, want %s; evidence:\n%s", id, f.Severity, sev, strings.Join(f.Evidence, "\n"))
	}
	if ev := strings.Join(f.Evidence, "\n"); !strings.Contains(ev, evidence) {
		t.Errorf("%s: evidence does not say %q:\n%s", id, evidence, ev)
	}
	if !strings.Contains(f.Fix, fix) {
		t.Errorf("%s: fix does not say %q: %s", id, fix, f.Fix)
	}
	if sev == doctor.Error && r.code != 1 {
		t.Errorf("exit status %d with an error finding, want 1", r.code)
	}
	return f
}

// A healthy node on the local cloud: every source read, no finding, exit
// 0. This is also what keeps the story tests honest: each finding they
// assert appears only because the story broke the node.
func TestDoctorOnAHealthyNodeFindsNothing(t *testing.T) {
	c := startCluster(t, twoNodes, nil)
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		if _, err := c.Nodes[0].AddPod(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	res := runDoctor(t, c.Nodes[0], "--skip", "kubernetes")
	if res.code != 0 || len(res.report.Findings) != 0 {
		t.Fatalf("doctor on a healthy node: exit %d\n%s%s", res.code, res.out, res.stderr)
	}
	for _, s := range res.report.Sources {
		if !s.OK && s.Name != doctor.SourceKube {
			t.Errorf("source %s not read on a healthy node: %s", s.Name, s.Detail)
		}
	}
}
