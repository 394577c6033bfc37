package kubecluster

import (
	"os"
	"regexp"
	"testing"
)

// TestKubernetesModulesAgree: the API server (tools/kube-apiserver), the
// node and controller programs (tools/kubernetes) and the e2e tests
// (tools/e2e) come from the same Kubernetes release, staging modules
// included, so a version bump in one module and not the others fails here
// instead of as a skewed cluster or a suite of another release.
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
	node := pins("../../tools/kubernetes/go.mod")
	for _, other := range []string{"tools/kube-apiserver", "tools/e2e"} {
		o := pins("../../" + other + "/go.mod")
		for mod, v := range o {
			if node[mod] != v {
				t.Errorf("%s: %s pins %s, tools/kubernetes %q", mod, other, v, node[mod])
			}
		}
		for mod, v := range node {
			if o[mod] != v {
				t.Errorf("%s: tools/kubernetes pins %s, %s %q", mod, v, other, o[mod])
			}
		}
	}
}
