package main

import (
	"testing"

	"github.com/vpcnet/vpcnet/internal/depcheck"
)

// TestDeps keeps the plugin's start small: containerd starts it for every
// ADD and DEL, and exec, the Go runtime and package initialisation were
// half of a warm ADD when it carried gRPC (158 package initialisers, 17 MB).
func TestDeps(t *testing.T) {
	const start = "the plugin runs once per ADD and DEL; its package initialisation and size are on every pod's path"
	depcheck.Check(t, "github.com/vpcnet/vpcnet/cmd/vpcnet", depcheck.Rules{
		Deps: map[string]string{
			"google.golang.org/grpc": start + " (agentapi is a plain JSON protocol)",
			"net/http":               start,
		},
		Prefixes: map[string]string{
			"google.golang.org/protobuf": start,
			"github.com/aws/":            start + "; EC2 is the agent's",
			"k8s.io/":                    start + "; the API server is the agent's",
		},
	})
}
