package main

import (
	"testing"

	"github.com/vpcnet/vpcnet/internal/depcheck"
)

// TestDeps keeps the plugin's start small, as cmd/vpcnet's does: the
// runtime starts it for every ADD and DEL of every pod. Unlike vpcnet it
// may carry net/http: CNI's invoke package, which execs the IPAM plugin,
// brings it with OpenTelemetry's propagation; measured with
// GODEBUG=inittrace=1, package initialisation took 1.0 ms, as vpcnet's.
func TestDeps(t *testing.T) {
	const start = "the plugin runs once per ADD and DEL; its package initialisation and size are on every pod's path"
	depcheck.Check(t, "github.com/vpcnet/vpcnet/cmd/vpcnet-egress-v4", depcheck.Rules{
		Deps: map[string]string{
			"google.golang.org/grpc": start,
		},
		Prefixes: map[string]string{
			"google.golang.org/protobuf": start,
			"github.com/aws/":            start + "; EC2 is the agent's",
			"k8s.io/":                    start + "; the API server is the agent's",
		},
	})
}
