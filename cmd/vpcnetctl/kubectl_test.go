package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestInstalledAsKubectlVpcnetItIsKubectlsPlugin(t *testing.T) {
	for argv0, want := range map[string]bool{
		"/usr/local/bin/kubectl-vpcnet": true,
		"kubectl-vpcnet":                true,
		"/usr/local/bin/vpcnetctl":      false,
		"./vpcnetctl":                   false,
	} {
		if got := isKubectlPlugin(argv0); got != want {
			t.Errorf("isKubectlPlugin(%q) = %v, want %v", argv0, got, want)
		}
	}
}

func TestKubectlVpcnetCommandLine(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"--help", []string{"--help"}, 0, "kubectl vpcnet status|doctor NODE", ""},
		{"help names the RBAC", []string{"-h"}, 0, "vpcnet-operator", ""},
		{"version needs no cluster", []string{"version"}, 0, "kubectl-vpcnet ", ""},
		{"status without a node", []string{"status"}, 2, "", "want `kubectl vpcnet status NODE`"},
		{"help names policy", []string{"--help"}, 0, "policy NODE [NAMESPACE/POD]", ""},
		{"policy without a node", []string{"policy"}, 2, "", "`kubectl vpcnet policy NODE [NAMESPACE/POD]`"},
		{"policy of two pods", []string{"policy", "n1", "default/a", "default/b"}, 2, "", "`kubectl vpcnet policy NODE [NAMESPACE/POD]`"},
		{"policy of a pod without its namespace", []string{"policy", "n1", "web-1"}, 2, "", `"web-1": want the pod as NAMESPACE/POD`},
		{"status takes no pod", []string{"status", "n1", "default/web-1"}, 2, "", "want `kubectl vpcnet status NODE`"},
		{"unknown command", []string{"restart", "n1"}, 2, "", "want `kubectl vpcnet status NODE`"},
		{"bad output format", []string{"status", "n1", "-o", "yaml"}, 2, "", `-o "yaml"`},
		{"no kubeconfig", []string{"status", "n1", "--kubeconfig", "/nonexistent/kubeconfig"}, 1, "", "give --kubeconfig FILE or set KUBECONFIG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runKubectl(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, &stdout, &stderr)
			}
			if !strings.Contains(stdout.String(), tt.wantOut) || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q", &stdout, &stderr, tt.wantOut, tt.wantErr)
			}
		})
	}
}
