package e2e

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/dataplane"
	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/simcluster"
)

// vpcnet maps hostPorts itself (the agent's configuration list declares
// portMappings and chains no portmap) and the reference bandwidth plugin
// runs after it: a hostPort reaches the pod from another node and from
// the node itself, the pod's veth is shaped, and DEL removes both.
func TestHostPortsAndChainedBandwidthWork(t *testing.T) {
	c := startCluster(t, twoNodes, nil)
	a, b := c.Nodes[0], c.Nodes[1]
	ctx := t.Context()
	p, err := a.AddPodWith(ctx, "hostport", simcluster.PodOptions{
		Chain: []map[string]any{{"type": "bandwidth", "capabilities": map[string]bool{"bandwidth": true}}},
		Capabilities: map[string]any{
			"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}},
			"bandwidth":    map[string]any{"ingressRate": 8_000_000, "ingressBurst": 80_000, "egressRate": 8_000_000, "egressBurst": 80_000},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := fabric.Listen(p.NetNS, "tcp4", p.Addr.String()+":80")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(conn, "hello from the pod\n")
			conn.Close()
		}
	}()
	hostPort := a.PrimaryIP.String() + ":8080"
	if got, err := fetch(ctx, b.NetNS, hostPort); err != nil || !strings.Contains(got, "hello from the pod") {
		t.Errorf("hostPort %s from %s: %q, %v", hostPort, b.ID, got, err)
	}
	for _, at := range []string{hostPort, "127.0.0.1:8080"} {
		if got, err := fetch(ctx, a.NetNS, at); err != nil || !strings.Contains(got, "hello from the pod") {
			t.Errorf("hostPort %s from its own node: %q, %v", at, got, err)
		}
	}
	veth := dataplane.HostVethName("eni", p.Namespace, p.Name)
	if n := qdiscs(t, a, veth); n == 0 {
		t.Errorf("no traffic shaping on %s after ADD with a bandwidth limit", veth)
	}
	if err := a.CheckPod(ctx, p); err != nil {
		t.Errorf("CHECK with the chain: %v", err)
	}

	if err := a.DelPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, err := fetch(ctx, b.NetNS, hostPort); err == nil {
		t.Errorf("hostPort still answers after DEL: %q", got)
	}
	if rules := nftTable(t, a, "vpcnet-hostport"); rules != "" {
		t.Errorf("hostPort rules left after DEL:\n%s", rules)
	}
	if left := leftAfterDel(t, a); len(left) > 0 {
		t.Errorf("left after DEL: %v", left)
	}
}

func fetch(ctx context.Context, nsPath, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := fabric.Dial(ctx, nsPath, "tcp", addr) // the family of addr
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	data, err := io.ReadAll(conn)
	return string(data), err
}

// qdiscs counts the non-default queueing disciplines on a node's link.
func qdiscs(t *testing.T, n *simcluster.Node, link string) int {
	t.Helper()
	nl := nodeHandle(t, n)
	defer nl.Close()
	l, err := nl.LinkByName(link)
	if err != nil {
		t.Fatalf("%s on %s: %v", link, n.ID, err)
	}
	qs, err := nl.QdiscList(l)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, q := range qs {
		if q.Type() != "noqueue" && q.Type() != "pfifo_fast" {
			count++
		}
	}
	return count
}

// nftTable is `nft list table ip name` in the node, or "" when there is
// no such table.
func nftTable(t *testing.T, n *simcluster.Node, name string) string {
	t.Helper()
	var out []byte
	err := fabric.Do(n.NetNS, func() error {
		var err error
		// A child process starts in the namespace of the thread forking it.
		out, err = exec.Command("nft", "list", "table", "ip", name).CombinedOutput()
		return err
	})
	if err != nil {
		if strings.Contains(string(out), "No such file or directory") {
			return ""
		}
		t.Fatalf("nft list table ip %s on %s: %v: %s", name, n.ID, err, out)
	}
	return string(out)
}
