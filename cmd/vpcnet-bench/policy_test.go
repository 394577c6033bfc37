package main

import (
	"net/netip"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/vpcnet/vpcnet/netpol"
)

func TestSettledAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := func(oks ...bool) []attempt {
		var out []attempt
		for i, ok := range oks {
			out = append(out, attempt{start: at(-10 + 5*i), ok: ok, done: true})
		}
		return out
	}
	// Two attempts before t0 and two after it still allowed, then the
	// change denies.
	as := run(true, true, true, true, false, false, false, false, false)
	got, ok := settledAt(as, t0, false)
	if !ok || !got.Equal(at(10)) {
		t.Errorf("settledAt = %v, %v; want %v", got, ok, at(10))
	}
	// Too few in a row yet.
	if _, ok := settledAt(as[:8], t0, false); ok {
		t.Error("settled after 4 attempts with the new verdict")
	}
	// An attempt still pending hides those after it.
	pending := append([]attempt(nil), as...)
	pending[5].done = false
	if _, ok := settledAt(pending, t0, false); ok {
		t.Error("settled with an earlier attempt pending")
	}
	// Attempts before t0 do not count against the change.
	early := run(false, false, true, true, true, true, true)
	if got, ok := settledAt(early, t0, true); !ok || !got.Equal(at(0)) {
		t.Errorf("settledAt = %v, %v; want %v", got, ok, at(0))
	}
}

// The scenario's design, checked with the compiler the agent runs: the
// measured pods of bench-pol are isolated both ways by the policies the
// report names, the open server by none, and the client reaches the
// selected server through allow-client alone.
func TestPolicyScenarioShapes(t *testing.T) {
	nps := policies()
	if len(nps) != 1000 {
		t.Fatalf("%d policies, want 1000", len(nps))
	}
	seen := map[string]bool{}
	for _, np := range nps {
		key := np.Namespace + "/" + np.Name
		if seen[key] {
			t.Fatalf("policy %s twice", key)
		}
		seen[key] = true
	}
	c := &netpol.Cluster{Policies: nps, Namespaces: map[string]map[string]string{
		benchPolNS:    {"team": "team-bench", "env": "bench", "kubernetes.io/metadata.name": benchPolNS},
		benchOpenNS:   {"kubernetes.io/metadata.name": benchOpenNS},
		"kube-system": {"kubernetes.io/metadata.name": "kube-system"},
	}}
	for i := range policyNamespaces {
		l := namespaceLabels(i)
		l["kubernetes.io/metadata.name"] = policyNS(i)
		c.Namespaces[policyNS(i)] = l
	}
	addrs := map[netip.Addr]bool{}
	for i := range policyPods {
		p := backgroundPod(i)
		a := backgroundAddr(i)
		if addrs[a] {
			t.Fatalf("address %s twice", a)
		}
		addrs[a] = true
		c.Pods = append(c.Pods, netpol.Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, IP: a})
	}
	client := netpol.Pod{Namespace: benchOpenNS, Name: "client", Labels: clientLabels, IP: netip.MustParseAddr("10.0.1.1")}
	selected := netpol.Pod{Namespace: benchPolNS, Name: "server-selected", Labels: selectedLabels, IP: netip.MustParseAddr("10.0.1.2")}
	open := netpol.Pod{Namespace: benchOpenNS, Name: "server-open", Labels: openLabels, IP: netip.MustParseAddr("10.0.1.3")}
	c.Pods = append(c.Pods, client, selected, open)
	local := []netpol.Local{{Pod: client}, {Pod: selected}, {Pod: open}}

	rs := netpol.Compile(c, local, netpol.Standard)
	if len(rs.Pods) != 1 || rs.Pods[0].Pod.Name != selected.Name {
		t.Fatalf("isolated pods %+v, want %s alone", rs.Pods, selected.Name)
	}
	r := rs.Pods[0]
	if r.Ingress == nil || len(r.Ingress.Policies) != 5 || r.Egress == nil || len(r.Egress.Policies) != 3 {
		t.Fatalf("the selected server's verdicts: ingress %+v, egress %+v; want 5 and 3 policies", r.Ingress, r.Egress)
	}
	conn := func(to netpol.Pod) netpol.Conn {
		return netpol.Conn{Src: client.IP, Dst: to.IP, Protocol: netpol.TCP, Port: serverPort}
	}
	if !rs.Allowed(conn(selected)) || !rs.Allowed(conn(open)) {
		t.Error("the client does not reach both servers")
	}
	// Without allow-client's allowance, the client is denied.
	denied := make([]*networkingv1.NetworkPolicy, len(nps))
	copy(denied, nps)
	for i, np := range denied {
		if np.Namespace == benchPolNS && np.Name == allowClient {
			denied[i] = allowClientPolicy(false)
		}
	}
	c.Policies = denied
	rs = netpol.Compile(c, local, netpol.Standard)
	if rs.Allowed(conn(selected)) {
		t.Error("the client reaches the selected server with allow-client off")
	}
	if !rs.Allowed(conn(open)) {
		t.Error("the client does not reach the open server with allow-client off")
	}
}
