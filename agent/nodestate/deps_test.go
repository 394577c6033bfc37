package nodestate_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the agent's state machine (package nodestate) a deterministic core that anyone can test,
// replay and reason about: no I/O, no network, no cloud, no cluster. Time
// enters only as a parameter; that cannot be checked by imports, so review
// watches for time.Now.
func TestDeps(t *testing.T) {
	// Banned anywhere in the dependency graph.
	badDeps := map[string]string{
		"net":                            "addresses are net/netip values; package net brings sockets and DNS",
		"net/http":                       "the core serves and calls nothing; introspection lives in the agent",
		"os/exec":                        "the core runs no programs",
		"github.com/vishvananda/netlink": "kernel routes and links are the agent's dataplane work",
		"github.com/google/nftables":     "SNAT and connmark rules are the agent's dataplane work",
		"google.golang.org/grpc":         "the plugin-agent API is the agent's; the core only answers calls",
	}
	// Banned as prefixes anywhere in the dependency graph.
	badPrefixes := map[string]string{
		"github.com/aws/": "EC2 and IMDS calls are the agent's; the planner returns actions instead",
		"k8s.io/":         "the core must not depend on the API server; the agent feeds it what it needs",
	}
	// Banned as direct imports only: fmt and time use them inside the
	// standard library, but the core itself must not reach the OS.
	badImports := map[string]string{
		"os":      "no files, environment or process state; the checkpoint and config are read by the agent",
		"syscall": "no system calls",
	}

	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("TestDeps needs the go command on PATH: %v", err)
	}
	deps := goList(t, goTool, "-deps", "-f", "{{.ImportPath}}")
	imports := goList(t, goTool, "-f", "{{join .Imports \"\\n\"}}")

	for _, dep := range deps {
		if why, bad := badDeps[dep]; bad {
			t.Errorf("package nodestate depends on %s: %s", dep, why)
		}
		for prefix, why := range badPrefixes {
			if strings.HasPrefix(dep, prefix) {
				t.Errorf("package nodestate depends on %s: %s", dep, why)
			}
		}
	}
	for _, imp := range imports {
		if why, bad := badImports[imp]; bad {
			t.Errorf("package nodestate imports %s: %s", imp, why)
		}
	}
	if len(deps) == 0 || len(imports) == 0 {
		t.Fatalf("go list found %d dependencies and %d imports; it did not list the package", len(deps), len(imports))
	}
}

// goList runs go list on package nodestate (not its tests, whose imports are
// free) and returns the words it prints.
func goList(t *testing.T, goTool string, args ...string) []string {
	t.Helper()
	args = append(append([]string{"list"}, args...), "github.com/vpcnet/vpcnet/agent/nodestate")
	out, err := exec.Command(goTool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}
