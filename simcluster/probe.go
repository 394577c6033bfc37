package simcluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
)

// Endpoint is somewhere a TCP connection can start or end: a pod, a node,
// or the internet stand-in.
type Endpoint struct {
	Name  string
	NetNS string
	Addr  netip.Addr
}

// Endpoint of the pod.
func (p *Pod) Endpoint() Endpoint { return Endpoint{Name: p.Name, NetNS: p.NetNS, Addr: p.Addr} }

// Endpoint of the node, at its primary address.
func (n *Node) Endpoint() Endpoint { return Endpoint{Name: n.ID, NetNS: n.NetNS, Addr: n.PrimaryIP} }

// Internet is the host standing for the internet.
func (c *Cluster) Internet() Endpoint {
	return Endpoint{Name: "internet", NetNS: c.state.Internet, Addr: fabric.InternetAddr}
}

// Internet6 is the internet stand-in at its IPv6 address.
func (c *Cluster) Internet6() Endpoint {
	return Endpoint{Name: "internet", NetNS: c.state.Internet, Addr: fabric.InternetAddr6}
}

// Probe opens a TCP connection from one endpoint to another and returns
// the source address the receiver saw: the pod's own address inside the
// VPC, the node's primary address after SNAT. The listener lives only for
// the probe, so probing needs nothing running in the pods. The family is
// the destination's.
func Probe(ctx context.Context, from, to Endpoint) (netip.Addr, error) {
	network := "tcp4"
	if to.Addr.Is6() {
		network = "tcp6"
	}
	ln, err := fabric.Listen(to.NetNS, network, net.JoinHostPort(to.Addr.String(), "0"))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("listen in %s: %w", to.Name, err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := fabric.Dial(ctx, from.NetNS, network, net.JoinHostPort(to.Addr.String(), strconv.Itoa(port)))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s → %s (%s): %w", from.Name, to.Name, to.Addr, err)
	}
	defer conn.Close()
	select {
	case c, ok := <-accepted:
		if !ok {
			return netip.Addr{}, fmt.Errorf("%s → %s: listener closed", from.Name, to.Name)
		}
		defer c.Close()
		return c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(), nil
	case <-ctx.Done():
		return netip.Addr{}, fmt.Errorf("%s → %s: connected but never accepted: %w", from.Name, to.Name, ctx.Err())
	}
}

// CheckInsideVPC connects every pod to every other pod and to every node
// and checks that each receiver sees the pod's own address: inside the VPC
// nothing is translated. It returns how many connections it made and
// every failure.
func (c *Cluster) CheckInsideVPC(ctx context.Context, pods []*Pod) (int, []error) {
	n := 0
	var errs []error
	for _, a := range pods {
		var targets []Endpoint
		for _, node := range c.Nodes {
			targets = append(targets, node.Endpoint())
		}
		for _, b := range pods {
			if b != a {
				targets = append(targets, b.Endpoint())
			}
		}
		for _, to := range targets {
			n++
			seen, err := Probe(ctx, a.Endpoint(), to)
			switch {
			case err != nil:
				errs = append(errs, err)
			case seen != a.Addr:
				errs = append(errs, fmt.Errorf("%s saw %s as %s, want its own address %s: traffic inside the VPC must not be translated", to.Name, a.Name, seen, a.Addr))
			}
		}
	}
	return n, errs
}
