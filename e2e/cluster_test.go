package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
)

// twoNodes is a VPC with two m5.large nodes in one subnet and a bigger
// node for bursts. ENIs attach after a second, as fast as EC2 at its best.
const topology = `
region: us-west-2
vpc: {id: vpc-e2e, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/22}
securityGroups: [sg-e2e]
instances:
%s
attachDelay: 1s
detachDelay: 500ms
imdsLag: 200ms
seed: 7
`

// startCluster runs a local cloud with the given instances (YAML list
// items) and waits for every agent to be ready. Everything is removed when
// the test ends, and the agents' logs are printed if it failed.
func startCluster(t *testing.T, instances string, nodeEnv map[string][]string) *simcluster.Cluster {
	t.Helper()
	topo, err := sim.ParseTopology([]byte(fmt.Sprintf(topology, instances)))
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("vpcsim-t%04x-", rand.IntN(1<<16))
	state := stateDir(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, err := simcluster.Start(ctx, simcluster.Options{
		Topology: topo, BinDir: binDir, StateDir: state, Prefix: prefix, NodeEnv: nodeEnv,
		AgentEnv: []string{"VPCNET_RECONCILE_INTERVAL=5s", "IP_COOLDOWN_PERIOD=1", "VPCNET_ENI_GRACE=5s", "VPCNET_ENI_DETACH_HOLD=5s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				data, _ := os.ReadFile(n.AgentLog())
				t.Logf("log of vpcnetd on %s:\n%s", n.ID, tail(string(data), 40))
				// VPCNET_E2E_LOGS keeps whole logs of failed tests.
				if dir := os.Getenv("VPCNET_E2E_LOGS"); dir != "" {
					name := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+n.ID+".log")
					if err := os.MkdirAll(dir, 0o755); err == nil {
						os.WriteFile(name, data, 0o644)
					}
				}
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("tear down the local cloud: %v", err)
		}
		if left := namespaces(t, prefix); len(left) > 0 {
			t.Errorf("namespaces left after teardown: %v", left)
		}
	})
	if err := c.Fabric.Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func namespaces(t *testing.T, prefix string) []string {
	ents, err := os.ReadDir("/var/run/netns")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, filepath.Join("/var/run/netns", e.Name()))
		}
	}
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
