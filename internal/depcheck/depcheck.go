// Package depcheck is the import-boundary test of vpcnet's pure packages
// (the pool and planner, the agent's state machine, the shared network
// facts): it lists a package's dependencies with `go list` and fails the
// test on each banned one, with the reason it is banned.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// Rules say what a package may not depend on, each with the reason.
type Rules struct {
	// Deps are banned anywhere in the dependency graph.
	Deps map[string]string
	// Prefixes are banned as import-path prefixes anywhere in the graph.
	Prefixes map[string]string
	// Imports are banned as direct imports only: the standard library
	// uses some of them inside, but the package itself must not.
	Imports map[string]string
}

// Check fails t for every dependency of pkg (not of its tests, whose
// imports are free) that the rules ban.
func Check(t *testing.T, pkg string, r Rules) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the dependency check needs the go command on PATH: %v", err)
	}
	deps := goList(t, goTool, pkg, "-deps", "-f", "{{.ImportPath}}")
	imports := goList(t, goTool, pkg, "-f", "{{join .Imports \"\\n\"}}")
	for _, dep := range deps {
		if dep == pkg {
			continue // go list -deps lists the package itself
		}
		if why, bad := r.Deps[dep]; bad {
			t.Errorf("package %s depends on %s: %s", pkg, dep, why)
		}
		for prefix, why := range r.Prefixes {
			if strings.HasPrefix(dep, prefix) {
				t.Errorf("package %s depends on %s: %s", pkg, dep, why)
			}
		}
	}
	for _, imp := range imports {
		if why, bad := r.Imports[imp]; bad {
			t.Errorf("package %s imports %s: %s", pkg, imp, why)
		}
	}
	if len(deps) == 0 || len(imports) == 0 {
		t.Fatalf("go list found %d dependencies and %d imports; it did not list %s", len(deps), len(imports), pkg)
	}
}

func goList(t *testing.T, goTool, pkg string, args ...string) []string {
	t.Helper()
	args = append(append([]string{"list"}, args...), pkg)
	out, err := exec.Command(goTool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}
