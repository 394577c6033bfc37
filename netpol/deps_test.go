package netpol_test

import (
	"testing"

	"github.com/vpcnet/vpcnet/internal/depcheck"
)

// TestDeps keeps package netpol a pure compiler: API objects in, verdicts
// out. The watches are the agent's and the nftables writes the
// dataplane's, so the compiler can be checked against thousands of
// policies without a cluster or a kernel.
func TestDeps(t *testing.T) {
	badDeps := map[string]string{
		"os/exec":                        "the compiler runs no programs",
		"github.com/vishvananda/netlink": "routes and links are the dataplane's",
		"github.com/google/nftables":     "the rules are written by the dataplane from the compiler's Ruleset",
		"k8s.io/client-go/rest":          "the compiler must not depend on the API server; the agent feeds it",
	}
	badPrefixes := map[string]string{
		"github.com/aws/":   "the compiler has nothing to ask of EC2",
		"k8s.io/client-go/": "the compiler must not depend on the API server; the agent feeds it",
	}
	badImports := map[string]string{
		"os":      "no files, environment or process state",
		"syscall": "no system calls",
		"net":     "addresses are net/netip values",
		"time":    "verdicts do not depend on the clock",
		// The API types (metav1) bring net/http into the graph; the
		// compiler itself must not use it.
		"net/http": "the compiler calls no API server; the agent's watches feed it",
	}
	depcheck.Check(t, "github.com/vpcnet/vpcnet/netpol", depcheck.Rules{Deps: badDeps, Prefixes: badPrefixes, Imports: badImports})
}
