package netfacts_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps netfacts pure, so the plugin, the agent and their tests
// can call it anywhere: it computes, it reaches nothing. libcni's name
// rules bring package net and os into the graph for libcni's own types;
// netfacts itself must not use them, and nothing may bring the I/O and
// the layers below.
func TestDeps(t *testing.T) {
	// Banned anywhere in the dependency graph.
	badDeps := map[string]string{
		"net/http":                       "netfacts serves and calls nothing",
		"os/exec":                        "netfacts runs no programs",
		"github.com/vishvananda/netlink": "kernel work is dataplane's",
		"github.com/google/nftables":     "kernel work is dataplane's",
		"google.golang.org/grpc":         "the plugin API is agentapi's",
	}
	badPrefixes := map[string]string{
		"github.com/aws/":                        "EC2 and IMDS calls are cloud's",
		"k8s.io/client-go":                       "the API server is kube's",
		"k8s.io/api/":                            "the API types are kube's",
		"github.com/vpcnet/":                     "netfacts is the bottom of the graph: the plugin and the agent both import it",
		"github.com/containernetworking/plugins": "namespace and link helpers are dataplane's",
	}
	// Banned as direct imports: the libraries use them, netfacts must not.
	badImports := map[string]string{
		"os":      "no files, environment or process state",
		"syscall": "no system calls",
		"net":     "addresses are net/netip values",
		"io":      "no reading or writing",
		"time":    "no clock: a fact does not depend on when it is asked",
	}

	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("TestDeps needs the go command on PATH: %v", err)
	}
	deps := goList(t, goTool, "-deps", "-f", "{{.ImportPath}}")
	imports := goList(t, goTool, "-f", "{{join .Imports \"\\n\"}}")
	for _, dep := range deps {
		if why, bad := badDeps[dep]; bad {
			t.Errorf("package netfacts depends on %s: %s", dep, why)
		}
		for prefix, why := range badPrefixes {
			if strings.HasPrefix(dep, prefix) && dep != "github.com/vpcnet/vpcnet/netfacts" {
				t.Errorf("package netfacts depends on %s: %s", dep, why)
			}
		}
	}
	for _, imp := range imports {
		if why, bad := badImports[imp]; bad {
			t.Errorf("package netfacts imports %s: %s", imp, why)
		}
	}
	if len(deps) == 0 || len(imports) == 0 {
		t.Fatalf("go list found %d dependencies and %d imports; it did not list the package", len(deps), len(imports))
	}
}

// goList runs go list on package netfacts (not its tests) and returns the
// words it prints.
func goList(t *testing.T, goTool string, args ...string) []string {
	t.Helper()
	args = append(append([]string{"list"}, args...), "github.com/vpcnet/vpcnet/netfacts")
	out, err := exec.Command(goTool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}
