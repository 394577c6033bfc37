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

// A pod aws-node's egress-cni wired before a switch-over has a veth it
// named at random: vpcnetd finds it by sandbox in host-local's directory
// both plugins share, and the pod's egress verdicts judge its IPv4
// egress as they judge a pod vpcnet wired.
func TestAPodAWSNodesEgressCNIWiredIsJudgedByItsVeth(t *testing.T) {
	w := newWorld(t)
	awsEntry := w.awsNodeEgress(t)
	serveTCP(t, w.internet)
	old := w.newPod()
	if _, err := w.add(w.conf("0.4.0", awsEntry, old), old); err != nil {
		t.Fatalf("aws-node's ADD: %v", err)
	}
	if err := talkTCP(old.ns, internetIP+":80"); err != nil {
		t.Fatalf("the pod aws-node wired cannot reach %s; the check below would prove nothing: %v", internetIP, err)
	}
	dp, err := dataplane.New(dataplane.Options{NetNS: w.node.Path(), IPv6Policy: true, EgressV4Policy: true})
	if err != nil {
		t.Fatal(err)
	}
	wired, err := dp.EgressV4VethsByContainer(t.Context(), w.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	veth, ok := wired[old.rt.ContainerID]
	if !ok || veth == dataplane.EgressV4VethName("vpcnet", old.rt.ContainerID, old.rt.IfName) {
		t.Fatalf("egress veths by sandbox %v: want %s's, named by aws-node", wired, old.rt.ContainerID)
	}
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{{
		Pod:    verdicts.PodRef{Namespace: "default", Name: "old", IP: netip.MustParseAddr(podNet6 + "1")},
		Egress: &verdicts.Isolation{}, EgressV4Veth: veth,
	}}}
	if err := dp.SetPolicy(t.Context(), rs, false); err != nil {
		t.Fatal(err)
	}
	if err := talkTCP(old.ns, internetIP+":80"); err == nil {
		t.Error("the egress-isolated pod aws-node wired reached an IPv4 host through its veth")
	}
}
