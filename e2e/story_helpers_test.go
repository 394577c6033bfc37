package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
)

// storyEnv is what every story's agents run with: the e2e settings of
// startCluster.
var storyEnv = []string{"VPCNET_RECONCILE_INTERVAL=5s", "IP_COOLDOWN_PERIOD=1", "VPCNET_ENI_GRACE=5s", "VPCNET_ENI_DETACH_HOLD=5s"}

// startStory runs a local cloud from a whole topology, so a story can
// shape subnets, instance types and faults. With ready it waits until
// every agent is ready. Everything is removed when the test ends.
func startStory(t *testing.T, topology string, nodeEnv map[string][]string, ready bool) *simcluster.Cluster {
	t.Helper()
	topo, err := sim.ParseTopology([]byte(topology))
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("vpcsim-s%04x-", rand.IntN(1<<16))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, err := simcluster.Start(ctx, simcluster.Options{
		Topology: topo, BinDir: binDir, StateDir: stateDir(t), Prefix: prefix, NodeEnv: nodeEnv, AgentEnv: storyEnv,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				data, _ := os.ReadFile(n.AgentLog())
				t.Logf("log of vpcnetd on %s:\n%s", n.ID, tail(string(data), 30))
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
	if ready {
		if err := c.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// cloudAPI is an EC2 client on the emulator from the test's own
// namespace: the operator's (or the broken world's) hand on the cloud.
func cloudAPI(t *testing.T, c *simcluster.Cluster) *ec2.Client {
	srv := httptest.NewServer(c.Cloud.EC2Handler())
	t.Cleanup(srv.Close)
	return ec2.New(ec2.Options{
		Region: "us-west-2", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("sim", "sim", ""),
	})
}

// addUntilRefused adds pods until an ADD fails, as a Deployment scaling
// up would, and returns the pods that got an address and the failure.
func addUntilRefused(t *testing.T, n *simcluster.Node, prefix string, max int) ([]*simcluster.Pod, error) {
	t.Helper()
	var pods []*simcluster.Pod
	for i := range max {
		p, err := n.AddPod(t.Context(), fmt.Sprintf("%s-%d", prefix, i))
		if err != nil {
			return pods, err
		}
		pods = append(pods, p)
	}
	t.Fatalf("%d pods on %s and no ADD refused: the story did not break the node", max, n.ID)
	return nil, nil
}

// poll waits for cond with a deadline, for states that settle on their
// own (an agent noticing, EC2 finishing an attach).
func poll(t *testing.T, what string, d time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last error: %v)", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
