package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentDoesNotDependOnClientGo keeps the Kubernetes layer behind the
// Kube interface: the agent must build, test and run (the local cloud)
// without client-go, and package kube is the one place that speaks to the
// API server. The API's types and label selectors (k8s.io/api,
// k8s.io/apimachinery) are allowed: NetworkPolicy objects are data the
// policy compiler (netpol) reads, handed to the agent by package kube.
func TestAgentDoesNotDependOnClientGo(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test needs the go command on PATH: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", "github.com/vpcnet/vpcnet/agent").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed no dependencies: it did not list the package")
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "k8s.io/client-go") || dep == "github.com/vpcnet/vpcnet/kube" {
			t.Errorf("package agent depends on %s: Kubernetes is reached through the Kube interface, which package kube implements", dep)
		}
	}
}
