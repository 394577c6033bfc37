package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
