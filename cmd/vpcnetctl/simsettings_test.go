package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/simcluster"
)

// fakeBin is a --bin directory that passes `sim up`'s checks: nothing in
// it runs, as nothing must start in these tests.
func fakeBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []string{"vpcnetd", "vpcnet", "portmap"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Issue 24: settings could not reach the local cloud's agents. They are
// given with --agent-env and checked with the agent's own parser before
// anything starts: a bad one is one usage error naming it, and no
// background process is started.
func TestSimUpRefusesABadAgentSettingBeforeStarting(t *testing.T) {
	tests := []struct {
		env, want string
	}{
		{"WARM_IP_TARGET=banana", `WARM_IP_TARGET="banana"`},
		{"WARM_IP_TARGT=5", "did you mean WARM_IP_TARGET?"},
		{"VPCNET_STATE_DIR=/var/lib/vpcnet", "agent setting VPCNET_STATE_DIR: the local cloud sets it for each node itself"},
		{"WARM_IP_TARGET", `agent setting "WARM_IP_TARGET": want NAME=VALUE`},
	}
	bin := fakeBin(t)
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			var out, errw bytes.Buffer
			code := run(context.Background(), []string{"sim", "up", "--bin", bin, "--state", state, "--agent-env", "WARM_ENI_TARGET=2", "--agent-env", tt.env}, &out, &errw)
			if code != 2 || !strings.Contains(errw.String(), "--agent-env: ") || !strings.Contains(errw.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 naming %q", code, errw.String(), tt.want)
			}
			if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the state directory exists (%v): something started for settings that cannot work", err)
			}
		})
	}
}

// The background `sim run` gets the settings `sim up` was given, so the
// agents it starts, and starts again (`sim agent start`), have them.
func TestSimUpHandsItsAgentSettingsToTheBackgroundProcess(t *testing.T) {
	fs := simFlags("up", "", &bytes.Buffer{})
	cf := addClusterFlags(fs)
	if _, err := parseSimFlags(fs, []string{"--bin", fakeBin(t), "--agent-env", "WARM_IP_TARGET=5", "--agent-env", "MINIMUM_IP_TARGET=10"}); err != nil {
		t.Fatal(err)
	}
	opts, err := cf.options(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opts.AgentEnv, []string{"WARM_IP_TARGET=5", "MINIMUM_IP_TARGET=10"}) {
		t.Errorf("cluster options carry %q", opts.AgentEnv)
	}
	args := strings.Join(cf.runArgs(opts), " ")
	if !strings.Contains(args, "--agent-env WARM_IP_TARGET=5 --agent-env MINIMUM_IP_TARGET=10") {
		t.Errorf("sim run is started with %q, without the agent settings", args)
	}
}

// `WARM_IP_TARGET=5 vpcnetctl sim up` used to start the agents with the
// default and say nothing: the agents take only --agent-env, and the
// shell's settings are named with the flag that would pass them.
func TestASettingInTheShellIsNamedWithTheFlagThatPassesIt(t *testing.T) {
	environ := []string{"HOME=/root", "WARM_IP_TARGET=5", "MINIMUM_IP_TARGET=10", "VPCNET_STATE_DIR=/x", "VPCNET_KUBE_APISERVER=/bin/x"}
	var w bytes.Buffer
	shellSettingsIgnored(&w, []string{"MINIMUM_IP_TARGET=10"}, environ)
	want := "note: WARM_IP_TARGET=5 in this shell does not reach the local cloud's agents; give it to them with --agent-env WARM_IP_TARGET=5\n"
	if w.String() != want {
		t.Errorf("said %q; want only %q (MINIMUM_IP_TARGET is given, the local cloud sets VPCNET_STATE_DIR, VPCNET_KUBE_APISERVER is no agent setting)", w.String(), want)
	}
}

// Issue 24: `sim demo --state` was accepted and ignored. The demo runs in
// that directory and keeps it, so it is the demo's alone while it runs.
func TestSimDemoWithStateRefusesADirectoryAClusterRunsIn(t *testing.T) {
	state := t.TempDir()
	release, err := simcluster.LockState(state)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var out, errw bytes.Buffer
	code := run(context.Background(), []string{"sim", "demo", "--bin", fakeBin(t), "--state", state}, &out, &errw)
	if code != 1 || !strings.Contains(errw.String(), "already runs with state in "+state) || !strings.Contains(errw.String(), "give the demo another --state") {
		t.Errorf("exit %d, stderr %q; want 1: a local cloud already runs there", code, errw.String())
	}
}

// The demo takes no Kubernetes flags: it would ignore them.
func TestSimDemoRefusesTheKubernetesFlags(t *testing.T) {
	var out, errw bytes.Buffer
	if code := run(context.Background(), []string{"sim", "demo", "--kubernetes"}, &out, &errw); code != 2 || !strings.Contains(errw.String(), "-kubernetes") {
		t.Errorf("exit %d, stderr %q; want 2 refusing --kubernetes", code, errw.String())
	}
}

// `sim up --kubernetes --family ipv6` (make cluster-demo FAMILY=ipv6)
// starts the background process with the family, and without --topology
// on the demo's VPC made dual-stack, whose subnet gives every node an
// IPv6 address; the IPv4 demo's VPC stays IPv4-only.
func TestSimUpWithFamilyIPv6UsesADualStackVPCAndPassesTheFamilyOn(t *testing.T) {
	for _, c := range []struct {
		args      []string
		dualStack bool
	}{
		{[]string{"--kubernetes", "--family", "ipv6"}, true},
		{[]string{"--kubernetes"}, false},
	} {
		fs := simFlags("up", "", &bytes.Buffer{})
		cf := addClusterFlags(fs)
		if _, err := parseSimFlags(fs, append([]string{"--bin", fakeBin(t)}, c.args...)); err != nil {
			t.Fatal(err)
		}
		opts, err := cf.options(nil)
		if err != nil {
			t.Fatal(err)
		}
		sn := opts.Topology.Subnets[0]
		if got := sn.IPv6CIDR != "" && sn.AssignIPv6AddressOnCreation; got != c.dualStack {
			t.Errorf("%v: subnet %+v dual-stack %v, want %v", c.args, sn, got, c.dualStack)
		}
		if args := strings.Join(cf.runArgs(opts), " "); !strings.Contains(args, "--family "+*cf.family) {
			t.Errorf("%v: sim run is started with %q, without the family", c.args, args)
		}
	}
}
