package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeconfigYAML = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: "t0ken"}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func TestRESTConfigChoosesKubeconfigThenInClusterThenNone(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(good, []byte(kubeconfigYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	tests := []struct {
		name       string
		kubeconfig string
		env        map[string]string
		wantHost   string // "" with no error: no Kubernetes
		wantSource string
		wantErr    []string
	}{
		{name: "kubeconfig wins over the service account", kubeconfig: good, env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
			wantHost: "https://127.0.0.1:6443", wantSource: "kubeconfig " + good},
		{name: "neither: no Kubernetes (the local cloud)"},
		{name: "a kubeconfig that is not there", kubeconfig: filepath.Join(dir, "missing"),
			wantErr: []string{"VPCNET_KUBECONFIG=" + filepath.Join(dir, "missing")}},
		{name: "in the cluster without a service account token", env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
			wantErr: []string{"in-cluster Kubernetes config (KUBERNETES_SERVICE_HOST=10.96.0.1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, source, err := RESTConfig(tt.kubeconfig, env(tt.env))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("RESTConfig = %v, want an error", rc)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantHost == "" {
				if rc != nil {
					t.Fatalf("RESTConfig = %s, want none", rc.Host)
				}
				return
			}
			if rc == nil || rc.Host != tt.wantHost || source != tt.wantSource {
				t.Fatalf("RESTConfig = %v from %q, want %s from %q", rc, source, tt.wantHost, tt.wantSource)
			}
		})
	}
}
