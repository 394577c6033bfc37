package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/introspect"
)

func TestNodeCommandsExitWithTheCodeAScriptExpects(t *testing.T) {
	ready := fakeAgent(t, readyStatus()).URL
	notReady := fakeAgent(t, notReadyStatus()).URL
	down := unreachableAddr(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    []string // each must appear in stdout
		wantErrOut string   // must appear in stderr
	}{
		{"ready agent", []string{"status", "--agent", ready}, 0,
			[]string{"ready:", "yes", "t3.medium", "5 total, 1 assigned", "max pods:", "17 (EKS rule)", "none: the pool is at its target", "checkpoint"}, ""},
		{"agent answers but is not ready", []string{"status", "--agent", notReady}, 1,
			[]string{"ready:", "no", "last EC2 error:", "UnauthorizedOperation", "growth held:", "attach an ENI", "quarantined:", "10.0.0.12", "stale checkpoint entries", "10.0.0.13", "max pods problem:", "can address only 29"},
			"not ready: failing: cloud"},
		{"agent unreachable", []string{"status", "--agent", down}, 3, nil, "vpcnetd not reachable"},
		{"enis unreachable", []string{"enis", "--agent", down}, 3, nil, "not reachable"},
		{"enis table", []string{"enis", "--agent", ready}, 0, []string{"eni-0aaa (primary)", "subnet-1", "10.0.0.10"}, ""},
		{"pods table", []string{"pods", "--agent", ready}, 0, []string{"10.0.0.11", "default/web-1", "0123456789ab"}, ""},
		{"config table", []string{"config", "--agent", ready}, 0, []string{"WARM_IP_TARGET", "5"}, ""},
		{"flags after nothing else are still parsed", []string{"pods", "-o", "json", "--agent", ready}, 0, []string{`"address": "10.0.0.11"`}, ""},
		{"unknown output format", []string{"status", "--agent", ready, "-o", "yaml"}, 2, nil, `-o "yaml": want table or json`},
		{"unknown flag", []string{"enis", "--bogus"}, 2, nil, "flag provided but not defined"},
		{"stray argument", []string{"status", "node-1"}, 2, nil, `unexpected "node-1"`},
		{"status --help", []string{"status", "--help"}, 0, []string{"usage: vpcnetctl status", "exit codes:"}, ""},
		{"help lists exit codes", []string{"help"}, 0, []string{"exit codes:", "3  the agent is not reachable"}, ""},
		{"unknown command", []string{"frobnicate"}, 2, nil, `unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, &stdout, &stderr)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, &stdout)
				}
			}
			if !strings.Contains(stderr.String(), tt.wantErrOut) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErrOut, &stderr)
			}
		})
	}
}

func TestEveryCommandTakesHelpAndExitsZero(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "sim" {
				t.Skip("sim's subcommands and their help belong to the local cloud's owner (sim_test.go)")
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{c.name, "--help"}, &stdout, &stderr); code != 0 {
				t.Fatalf("%s --help: exit %d\nstdout:\n%s\nstderr:\n%s", c.name, code, &stdout, &stderr)
			}
			// Usage belongs on stdout (asked for, not an error); either
			// stream is accepted so a command's help text is its own.
			if !strings.Contains(stdout.String()+stderr.String(), "usage") {
				t.Errorf("%s --help printed no usage:\n%s%s", c.name, &stdout, &stderr)
			}
		})
	}
}

func TestStatusJSONIsTheAgentsOwnDocument(t *testing.T) {
	tests := []struct {
		name     string
		status   introspect.Status
		wantCode int
	}{
		{"ready", readyStatus(), 0},
		{"not ready", notReadyStatus(), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeAgent(t, tt.status)
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"status", "-o", "json", "--agent", srv.URL}, &stdout, &stderr); code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s", code, tt.wantCode, &stderr)
			}
			var got introspect.Status
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("stdout is not a /v1/status document: %v\n%s", err, &stdout)
			}
			if got.Ready != tt.status.Ready || got.InstanceID != tt.status.InstanceID || len(got.Conditions) != len(tt.status.Conditions) {
				t.Errorf("decoded %+v, want the served %+v", got, tt.status)
			}
		})
	}
}

func TestVersionSaysWhetherTheAgentIsTheSameBuild(t *testing.T) {
	same := readyStatus() // a test binary's version is "(devel)" with no commit
	other := readyStatus()
	other.Version, other.Commit = "v0.0.9", "abcdef123456"
	tests := []struct {
		name    string
		agent   string
		want    string
		wantErr string
	}{
		{"same build", fakeAgent(t, same).URL, "(same build)", ""},
		{"another build", fakeAgent(t, other).URL, "v0.0.9 commit abcdef123456: NOT the same build", ""},
		{"agent down", unreachableAddr(t), "vpcnetd   unknown: vpcnetd not reachable", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"version", "--agent", tt.agent}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, &stderr)
			}
			if !strings.HasPrefix(stdout.String(), "vpcnetctl ") || !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("stdout lacks %q:\n%s", tt.want, &stdout)
			}
		})
	}
}

// Issue 24: at a limit the planner has nothing it can do, so the plan is
// empty, and status said "at its target" two lines below "3 addresses
// short". The planned-change line agrees with the shortfall.
func TestStatusNeverSaysAtItsTargetBesideAShortfall(t *testing.T) {
	short := readyStatus()
	short.Addresses = introspect.Counts{Total: 29, Assigned: 29}
	short.Shortfall = "3 addresses short: all 3 ENIs the instance type allows are attached and full; use a larger instance type or enable prefix delegation"
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"status", "--agent", fakeAgent(t, short).URL}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	out := stdout.String()
	if strings.Contains(out, "at its target") {
		t.Errorf("status says the pool is at its target beside a shortfall:\n%s", out)
	}
	if !strings.Contains(out, "3 addresses short") || !strings.Contains(out, "none: the pool is short of its target and cannot grow (see shortfall)") {
		t.Errorf("status does not say the pool is short and cannot grow:\n%s", out)
	}
}
