package main

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/vpcnet/vpcnet/dataplane"
	"github.com/vpcnet/vpcnet/verdicts"
)

// NetworkPolicy of IPv6 pods' IPv4 egress with the real plugin: the
// agent writes each pod's egress verdicts for the veth its attachment
// will get (EgressV4VethName of the network, the container and the
// runtime's ifName, as vpcnetd names it) during vpcnet's part of the
// ADD, before this plugin runs; the veth the plugin then makes is that
// one, and the pod's first IPv4 connection meets its verdicts.
func TestThePluginsEgressVethIsTheOneTheAgentsVerdictsName(t *testing.T) {
	w := newWorld(t)
	serveTCP(t, w.internet)
	denied, allowed, open := w.newPod(), w.newPod(), w.newPod()
	dp, err := dataplane.New(dataplane.Options{NetNS: w.node.Path(), IPv6Policy: true, EgressV4Policy: true})
	if err != nil {
		t.Fatal(err)
	}
	// As the agent names an attachment's egress veth: the conflist's
	// name (the attachment's network), the sandbox, the runtime's ifName.
	veth := func(p pod) string { return dataplane.EgressV4VethName("vpcnet", p.rt.ContainerID, p.rt.IfName) }
	podRef := func(p pod, i int) verdicts.PodRef {
		return verdicts.PodRef{Namespace: "default", Name: p.rt.ContainerID, IP: netip.MustParseAddr(fmt.Sprintf("%s%d", podNet6, i))}
	}
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{
		{Pod: podRef(denied, 1), Egress: &verdicts.Isolation{}, EgressV4Veth: veth(denied)},
		{Pod: podRef(allowed, 2), Egress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "default/out egress[0]",
			Peers: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
			Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: 80, Last: 80}}}}}, EgressV4Veth: veth(allowed)},
	}}
	if err := dp.SetPolicy(t.Context(), rs, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []pod{denied, allowed, open} {
		if _, err := w.add(w.conf("1.1.0", w.entry(nil), p), p); err != nil {
			t.Fatalf("ADD %s: %v", p.rt.ContainerID, err)
		}
	}
	if err := talkTCP(denied.ns, internetIP+":80"); err == nil {
		t.Error("an egress-isolated pod whose policies allow nothing reached an IPv4 host through its egress veth")
	}
	if err := talkTCP(allowed.ns, internetIP+":80"); err != nil {
		t.Errorf("a pod whose egress allows 203.0.113.0/24:80 cannot reach %s: %v", internetIP, err)
	}
	if err := talkTCP(open.ns, internetIP+":80"); err != nil {
		t.Errorf("a pod not egress-isolated cannot reach %s: %v", internetIP, err)
	}
}
