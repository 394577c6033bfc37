package netfacts_test

import (
	"testing"

	"github.com/vpcnet/vpcnet/internal/depcheck"
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
	depcheck.Check(t, "github.com/vpcnet/vpcnet/netfacts", depcheck.Rules{Deps: badDeps, Prefixes: badPrefixes, Imports: badImports})
}
