package nodestate_test

import (
	"testing"

	"github.com/vpcnet/vpcnet/internal/depcheck"
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
	depcheck.Check(t, "github.com/vpcnet/vpcnet/agent/nodestate", depcheck.Rules{Deps: badDeps, Prefixes: badPrefixes, Imports: badImports})
}
