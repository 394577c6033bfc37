package conformance

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// A JUnit report in the shape Ginkgo v2 writes for Kubernetes' suite
// (leaf node type before the name, no failure message attribute, every
// spec of the binary listed, those outside the focus as skipped).
const junitSample = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="0" errors="0" failures="2" time="100">
  <testsuite name="Kubernetes e2e suite" package="/" tests="5" disabled="0" skipped="2" errors="0" failures="2" time="100">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="3.5"></testcase>
    <testcase name="[It] [sig-network] DNS should provide DNS for the cluster [Conformance]" classname="Kubernetes e2e suite" status="passed" time="12.2"></testcase>
    <testcase name="[It] [sig-network] Services should serve a basic endpoint from pods [Conformance]" classname="Kubernetes e2e suite" status="failed" time="40">
      <failure type="failed">[FAILED] service web is not reachable within 2m0s timeout on endpoint 10.96.4.4:80 over TCP protocol
In [It] at: service.go:123</failure>
    </testcase>
    <testcase name="[It] [sig-network] LoadBalancers should be able to create an internal type load balancer" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[It] [sig-network] Networking should update nodePort: http [Slow]" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[It] [sig-storage] CSI should mount a volume" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[SynchronizedAfterSuite]" classname="Kubernetes e2e suite" status="failed" time="1">
      <failure type="failed">namespaces left behind</failure>
    </testcase>
  </testsuite>
</testsuites>`

var sampleSelection = Selection{
	Name:    "sample",
	Focus:   regexp.MustCompile(`\[sig-network\]`),
	Exclude: regexp.MustCompile(`\[Slow\]`),
	Skips:   []Skip{{Pattern: `LoadBalancer`, Reason: "no cloud load balancer"}},
}

func TestReportShowsEachSelectedTestWithItsOutcomeAndReason(t *testing.T) {
	all, err := ParseJUnit(strings.NewReader(junitSample))
	if err != nil {
		t.Fatal(err)
	}
	got := Select(all, sampleSelection)
	want := []Result{
		{Name: "[SynchronizedAfterSuite]", Status: Failed, Reason: "namespaces left behind"},
		{Name: "[sig-network] DNS should provide DNS for the cluster [Conformance]", Status: Passed},
		{Name: "[sig-network] LoadBalancers should be able to create an internal type load balancer", Status: Skipped, Reason: "no cloud load balancer"},
		{Name: "[sig-network] Services should serve a basic endpoint from pods [Conformance]", Status: Failed,
			Reason: "service web is not reachable within 2m0s timeout on endpoint 10.96.4.4:80 over TCP protocol In [It] at: service.go:123"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		g.Duration = 0
		if g.Name != want[i].Name || g.Status != want[i].Status || !strings.Contains(g.Reason, want[i].Reason) {
			t.Errorf("result %d = %+v, want %+v", i, g, want[i])
		}
	}
	if !got[2].BySelection || got[1].BySelection {
		t.Errorf("skipped by the selection: %v for the LoadBalancer test, %v for the DNS test", got[2].BySelection, got[1].BySelection)
	}
	if got[1].Duration != 12200*time.Millisecond {
		t.Errorf("DNS test took %s, want 12.2s", got[1].Duration)
	}
	if c := Count(got); c.String() != "1 passed, 2 failed, 1 skipped" {
		t.Errorf("counts %q", c)
	}
}

func TestReportFailsLoudlyOnAFileThatIsNotJUnit(t *testing.T) {
	if _, err := ParseJUnit(strings.NewReader("Ran 0 of 7000 specs")); err == nil {
		t.Fatal("a log instead of a JUnit report parsed without error")
	}
}

func TestMarkdownNamesTheCommandTheSkipsAndEveryTest(t *testing.T) {
	all, err := ParseJUnit(strings.NewReader(junitSample))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	run := Run{Command: "make conformance", Selection: sampleSelection, Kubernetes: "v1.37.2", Started: time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC), Took: 90 * time.Second}
	if err := WriteMarkdown(&b, run, Select(all, sampleSelection)); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, s := range []string{
		"`make conformance`", "v1.37.2", "**1 passed, 2 failed, 1 skipped**",
		"- `LoadBalancer`: no cloud load balancer",
		"| [sig-network] DNS should provide DNS for the cluster [Conformance] | passed | 12s |",
		"| [sig-network] Services should serve a basic endpoint from pods [Conformance] | failed |",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("report lacks %q:\n%s", s, md)
		}
	}
	if strings.Contains(md, "sig-storage") || strings.Contains(md, "[Slow]") {
		t.Errorf("report lists a test outside the selection:\n%s", md)
	}
}

func TestSelectionsSkipOnlyWithAReasonAndFocusOnSigNetwork(t *testing.T) {
	for name, sel := range Selections {
		if sel.Name != name {
			t.Errorf("selection %q is named %q", name, sel.Name)
		}
		for _, k := range sel.Skips {
			if k.Reason == "" {
				t.Errorf("%s: skip %q has no reason", name, k.Pattern)
			}
			if _, err := regexp.Compile(k.Pattern); err != nil {
				t.Errorf("%s: skip %q: %v", name, k.Pattern, err)
			}
		}
		if name == NetPol.Name || name == NetPolIPv6.Name {
			continue
		}
		if !sel.Focus.MatchString("[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [NodeConformance] [Conformance]") {
			t.Errorf("%s does not select pod-to-pod connectivity", name)
		}
		if sel.Focus.MatchString("[sig-storage] CSI should mount a volume [Conformance]") {
			t.Errorf("%s selects a storage test", name)
		}
		if _, err := regexp.Compile(sel.GinkgoSkip()); err != nil {
			t.Errorf("%s: --ginkgo.skip %q: %v", name, sel.GinkgoSkip(), err)
		}
		if sel.Listed != nil {
			// A listed test runs nowhere (Exclude keeps it from the
			// suite): the report must say why.
			for _, example := range []string{"[Feature:IPv6DualStack]", "[Feature:Networking-IPv6]"} {
				if sel.Listed.MatchString(example) && sel.skipReason(example) == "" {
					t.Errorf("%s lists %s without a skip reason", name, example)
				}
			}
		}
	}
}

func TestTheNetPolSelectionRunsTheSCTPPolicyChecksButNotSCTPTraffic(t *testing.T) {
	name := func(s string) string { return "[sig-network] Netpol " + s + " [Feature:NetworkPolicy]" }
	for _, c := range []struct {
		test string
		want string // "run", "skip" or "out"
	}{
		{name("NetworkPolicy between server and client should support a 'default-deny-ingress' policy"), "run"},
		{name("NetworkPolicy between server and client should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP"), "run"},
		{name("[Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should enforce policy based on Ports"), "skip"},
		{"[sig-network] Services should serve a basic endpoint from pods [Conformance]", "out"},
	} {
		got := "out"
		if NetPol.Focus.MatchString(c.test) && !NetPol.Exclude.MatchString(c.test) {
			got = "run"
			if NetPol.skipReason(c.test) != "" {
				got = "skip"
			}
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.test, got, c.want)
		}
	}
}

// TestTheIPv6RunListsTheDualStackTestsAsSkippedAndRunsTheRest: the IPv6
// run selects what the network run does, and lists the suite's IPv6
// feature tests (left out by the [Feature: exclusion) as skipped with a
// reason about the local cloud, while other [Feature:] and [Serial]
// tests stay out of its report.
func TestTheIPv6RunListsTheDualStackTestsAsSkippedAndRunsTheRest(t *testing.T) {
	const junit = `<testsuites><testsuite>
<testcase name="[It] [sig-network] Services should serve a basic endpoint from pods [Conformance]" status="passed" time="3"></testcase>
<testcase name="[It] [sig-network] [Feature:IPv6DualStack] should have ipv4 and ipv6 internal node ip" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv6] [Experimental][LinuxOnly]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-network] Services should be able to up and down services [Serial]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`
	all, err := ParseJUnit(strings.NewReader(junit))
	if err != nil {
		t.Fatal(err)
	}
	got := Select(all, IPv6)
	if len(got) != 3 {
		t.Fatalf("IPv6 run reports %d tests, want 3: %+v", len(got), got)
	}
	for _, r := range got {
		switch {
		case strings.Contains(r.Name, "basic endpoint"):
			if r.Status != Passed {
				t.Errorf("%s: %s", r.Name, r.Status)
			}
		case r.Status != Skipped || !r.BySelection || !strings.Contains(r.Reason, "local cloud"):
			t.Errorf("%s: %s %q, want skipped by the selection with a reason about the local cloud", r.Name, r.Status, r.Reason)
		}
	}
	if IPv6.Family != "ipv6" || Network.Family != "" || CI.Family != "" {
		t.Errorf("families: ipv6 %q, network %q, ci %q", IPv6.Family, Network.Family, CI.Family)
	}
}
