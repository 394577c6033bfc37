package kubecluster

import (
	"os"
	"regexp"
	"testing"
)

// TestKubernetesModulesAgree: the API server (tools/kube-apiserver) and the
// node and controller programs (tools/kubernetes) come from the same
// Kubernetes release, staging modules included, so a version bump in one
// module and not the other fails here instead of as a skewed cluster.
func TestKubernetesModulesAgree(t *testing.T) {
	pins := func(path string) map[string]string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^\s*(k8s\.io/\S+)(?: => k8s\.io/\S+)? (v\S+)`).FindAllStringSubmatch(string(data), -1) {
			if m[1] == "k8s.io/kubernetes" || regexp.MustCompile(`=> `).MatchString(m[0]) {
				out[m[1]] = m[2]
			}
		}
		if out["k8s.io/kubernetes"] == "" {
			t.Fatalf("%s does not require k8s.io/kubernetes", path)
		}
		return out
	}
	api, node := pins("../../tools/kube-apiserver/go.mod"), pins("../../tools/kubernetes/go.mod")
	for mod, v := range api {
		if node[mod] != v {
			t.Errorf("%s: tools/kube-apiserver pins %s, tools/kubernetes %q", mod, v, node[mod])
		}
	}
	for mod, v := range node {
		if api[mod] != v {
			t.Errorf("%s: tools/kubernetes pins %s, tools/kube-apiserver %q", mod, v, api[mod])
		}
	}
}
