package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
)

// dualStack is a dual-stack VPC whose subnet gives each new ENI an IPv6
// address (the node's own), with two nodes in aws-node's IPv6 mode.
const dualStack = `
region: us-west-2
vpc: {id: vpc-e2e6, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:de00::/56'}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/22, ipv6Cidr: '2600:1f14:abc:de01::/64', assignIpv6AddressOnCreation: true}
securityGroups: [sg-e2e]
instances:
  - {id: i-a, type: m5.large, subnet: subnet-a}
  - {id: i-b, type: m5.large, subnet: subnet-a}
attachDelay: 1s
detachDelay: 500ms
imdsLag: 200ms
seed: 7
`

var ipv6NodeEnv = []string{"ENABLE_IPv6=true", "ENABLE_IPv4=false", "ENABLE_PREFIX_DELEGATION=true"}

// primaryENI is what EC2 has on the node's primary ENI now, and how many
// ENIs the node has.
func primaryENI(t *testing.T, c *simcluster.Cluster, node string) (sim.InterfaceInfo, int) {
	t.Helper()
	ifs, err := c.Cloud.Interfaces(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.DeviceIndex == 0 && i.NetworkCardIndex == 0 {
			return i, len(ifs)
		}
	}
	t.Fatalf("%s has no primary ENI", node)
	return sim.InterfaceInfo{}, 0
}

// Issue 27's done-means on the dual-stack local cloud, with the real
// vpcnetd, vpcnet and vpcnet-egress-v4 in each node: IPv6 pods get
// addresses from their node's one /80 on its primary ENI, reach each
// other across nodes and both nodes with their own addresses (no NAT in
// the VPC), reach the internet's IPv6 address untranslated and its IPv4
// address through their node's primary IPv4 address (ENABLE_V4_EGRESS,
// on by default), and not IMDS where VPCNET_POD_IMDS=deny; an IPv6
// pod's hostPort answers; and a node with 250 pods has attached no ENI
// for them.
func TestIPv6PodsAcrossNodesReachEachOtherTheNodesAndIPv4ThroughTheNode(t *testing.T) {
	denyIMDS := append(slices.Clone(ipv6NodeEnv), "VPCNET_POD_IMDS=deny")
	c := startStory(t, dualStack, map[string][]string{"i-a": denyIMDS, "i-b": ipv6NodeEnv}, true)
	ctx := t.Context()
	var pods []*simcluster.Pod
	for i := range 6 {
		n := c.Nodes[i%2]
		p, err := n.AddPod(ctx, fmt.Sprintf("v6-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		eni, _ := primaryENI(t, c, n.ID)
		if !p.Addr.Is6() || len(eni.IPv6Prefixes) != 1 || !eni.IPv6Prefixes[0].Contains(p.Addr) {
			t.Fatalf("%s on %s got %s; want an address of the node's one /80 %v", p.Name, n.ID, p.Addr, eni.IPv6Prefixes)
		}
		pods = append(pods, p)
	}
	nodes := map[string]simcluster.Endpoint{}
	for _, n := range c.Nodes {
		eni, _ := primaryENI(t, c, n.ID)
		if len(eni.IPv6Addresses) == 0 {
			t.Fatalf("%s has no IPv6 address of its own on its primary ENI", n.ID)
		}
		nodes[n.ID] = simcluster.Endpoint{Name: n.ID, NetNS: n.NetNS, Addr: eni.IPv6Addresses[0]}
	}

	t.Run("every pod reaches every other pod and both nodes with its own address", func(t *testing.T) {
		for _, a := range pods {
			var to []simcluster.Endpoint
			for _, b := range pods {
				if b != a {
					to = append(to, b.Endpoint())
				}
			}
			for _, n := range c.Nodes {
				to = append(to, nodes[n.ID])
			}
			for _, e := range to {
				seen, err := simcluster.Probe(ctx, a.Endpoint(), e)
				if err != nil {
					t.Error(err)
				} else if seen != a.Addr {
					t.Errorf("%s saw %s as %s, want its own address %s", e.Name, a.Name, seen, a.Addr)
				}
			}
		}
	})

	t.Run("the internet sees a pod's IPv6 address as it is and its IPv4 traffic as the node's", func(t *testing.T) {
		for _, p := range pods {
			n, _ := c.Node(p.Node)
			if seen, err := simcluster.Probe(ctx, p.Endpoint(), c.Internet6()); err != nil {
				t.Error(err)
			} else if seen != p.Addr {
				t.Errorf("internet saw %s over IPv6 as %s, want %s", p.Name, seen, p.Addr)
			}
			if seen, err := simcluster.Probe(ctx, p.Endpoint(), c.Internet()); err != nil {
				t.Errorf("IPv4 egress: %v", err)
			} else if seen != n.PrimaryIP {
				t.Errorf("internet saw %s over IPv4 as %s, want the node's primary address %s", p.Name, seen, n.PrimaryIP)
			}
		}
	})

	t.Run("VPCNET_POD_IMDS=deny keeps IPv6 pods from IMDS over their IPv4 egress", func(t *testing.T) {
		for _, p := range pods {
			short, cancel := context.WithTimeout(ctx, 3*time.Second)
			id, err := imdsGet(short, p.NetNS, "instance-id")
			cancel()
			switch {
			case p.Node == "i-a" && err == nil:
				t.Errorf("%s on i-a (VPCNET_POD_IMDS=deny) read IMDS through its IPv4 egress: instance %q", p.Name, id)
			case p.Node == "i-b" && (err != nil || strings.TrimSpace(id) != "i-b"):
				t.Errorf("%s on i-b (allow) reads IMDS through its IPv4 egress as %q, %v; want i-b", p.Name, id, err)
			}
		}
	})

	t.Run("an IPv6 pod's hostPort answers at its node's IPv6 address", func(t *testing.T) {
		a, b := c.Nodes[0], c.Nodes[1]
		p, err := a.AddPodWith(ctx, "v6-hostport", simcluster.PodOptions{Capabilities: map[string]any{
			"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := fabric.Listen(p.NetNS, "tcp6", net.JoinHostPort(p.Addr.String(), "80"))
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
				io.WriteString(conn, "hello from the IPv6 pod\n")
				conn.Close()
			}
		}()
		hostPort := net.JoinHostPort(nodes[a.ID].Addr.String(), "8080")
		for _, from := range []*simcluster.Node{b, a} {
			if got, err := fetch(ctx, from.NetNS, hostPort); err != nil || !strings.Contains(got, "hello from the IPv6 pod") {
				t.Errorf("hostPort %s from %s: %q, %v", hostPort, from.ID, got, err)
			}
		}
		if err := a.DelPod(ctx, p); err != nil {
			t.Fatal(err)
		}
		if got, err := fetch(ctx, b.NetNS, hostPort); err == nil {
			t.Errorf("hostPort still answers after DEL: %q", got)
		}
	})

	t.Run("a node with 250 pods attached no ENI for them", func(t *testing.T) {
		n := c.Nodes[1]
		const total = 250
		have := 0
		for _, p := range pods {
			if p.Node == n.ID {
				have++
			}
		}
		var wg sync.WaitGroup
		work := make(chan int)
		errs := make(chan error, total)
		for range 4 {
			wg.Go(func() {
				for i := range work {
					if _, err := n.AddPod(ctx, fmt.Sprintf("many-%d", i)); err != nil {
						errs <- err
					}
				}
			})
		}
		for i := range total - have {
			work <- i
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		holders, err := n.Holders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		owner := map[netip.Addr]string{}
		for _, h := range holders {
			if prev, dup := owner[h.Address]; dup {
				t.Errorf("%s and %s both hold %s", prev, h.ContainerID, h.Address)
			}
			owner[h.Address] = h.ContainerID
		}
		if len(holders) != total {
			t.Errorf("%s's agent records %d pods, want %d", n.ID, len(holders), total)
		}
		eni, enis := primaryENI(t, c, n.ID)
		if enis != 1 || len(eni.IPv6Prefixes) != 1 {
			t.Fatalf("with %d pods %s has %d ENIs and IPv6 prefixes %v, want its primary ENI alone with one /80", len(holders), n.ID, enis, eni.IPv6Prefixes)
		}
		for a := range owner {
			if !eni.IPv6Prefixes[0].Contains(a) {
				t.Errorf("pod address %s is outside the node's /80 %s", a, eni.IPv6Prefixes[0])
			}
		}
	})
}
