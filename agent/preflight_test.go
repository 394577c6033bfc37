package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/ipam"
)

// A role without ec2:DeleteNetworkInterface and without ec2:CreateTags
// (tags on create), as a hand-written policy might be.
var restrictedTopology = strings.Replace(topology,
	"- {id: i-node1, type: m5.large, subnet: subnet-a}",
	"- {id: i-node1, type: m5.large, subnet: subnet-a, role: narrow}", 1) + `
roles:
  narrow: {deny: [DeleteNetworkInterface, CreateTags]}
`

func TestPreflightNamesMissingPermissionsAndTheAgentRunsWithoutTheirFeatures(t *testing.T) {
	w := newWorldOf(t, restrictedTopology)
	k := newFakeKube(KubeState{Reachable: true, Node: "n"})
	n := w.node("i-node1", nil)
	n.kube = k
	a := n.start(t)
	a.waitReady(t) // the primary ENI's addresses serve pods: ready

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if a.Permitted(ctx, FeatureLeakedENIs) {
		t.Error("leaked-ENI collection permitted without ec2:DeleteNetworkInterface")
	}
	if !a.Permitted(ctx, FeatureReadENIs) {
		t.Error("reading ENIs not permitted, yet DescribeNetworkInterfaces is allowed")
	}

	st := a.statusView(ctx).(statusView)
	want := []introspect.MissingPermission{
		{Action: "ec2:CreateTags", Features: []string{FeatureGrow}},
		{Action: "ec2:DeleteNetworkInterface", Features: []string{FeatureShrink, FeatureLeakedENIs}},
	}
	if len(st.IAM.Missing) != len(want) {
		t.Fatalf("/v1/status iam = %+v, want %d missing", st.IAM, len(want))
	}
	for i, m := range st.IAM.Missing {
		if m.Action != want[i].Action || strings.Join(m.Features, "|") != strings.Join(want[i].Features, "|") {
			t.Errorf("missing[%d] = %s for %v, want %s for %v", i, m.Action, m.Features, want[i].Action, want[i].Features)
		}
		if !strings.Contains(m.Add, `"Action": "`+m.Action+`"`) || !strings.Contains(m.Message, "not authorized to perform: "+m.Action) {
			t.Errorf("missing[%d]: add %q, message %q", i, m.Add, m.Message)
		}
	}
	if !strings.Contains(st.IAM.Missing[0].Add, `"ec2:CreateAction": "CreateNetworkInterface"`) {
		t.Errorf("CreateTags fix %q lacks the tag-on-create condition", st.IAM.Missing[0].Add)
	}
	wantOff := []string{FeatureGrow, FeatureShrink, FeatureLeakedENIs}
	if strings.Join(st.IAM.FeaturesOff, "|") != strings.Join(wantOff, "|") {
		t.Errorf("features off %q, want %q", st.IAM.FeaturesOff, wantOff)
	}
	if len(st.IAM.NotProbed) != 2 || len(st.IAM.Unknown) != 0 {
		t.Errorf("not probed %q (want Assign and Unassign), unknown %q (want none)", st.IAM.NotProbed, st.IAM.Unknown)
	}
	c := a.waitCondition(t, CondEC2Permissions, false, "ec2:DeleteNetworkInterface (needed for "+FeatureShrink+", "+FeatureLeakedENIs+")")
	if !strings.Contains(c.Message, "running without") {
		t.Errorf("condition %q", c.Message)
	}
	e := waitNodeEventSaying(t, k, EventUnauthorized, "running without")
	for _, want := range []string{"ec2:CreateTags", "ec2:DeleteNetworkInterface", "deploy/iam-policy.json"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("Node Event %q lacks %q", e.Message, want)
		}
	}
	// Pods still get addresses: the missing permissions cost only what
	// needs them.
	if _, err := a.Add(ctx, key(1), pod(1)); err != nil {
		t.Errorf("Add with a narrow role: %v", err)
	}
	if ready, conds := a.ready.get(); !ready {
		t.Errorf("not ready because of IAM: %s", failing(conds))
	}
}

func TestPreflightWithEveryPermissionIsQuiet(t *testing.T) {
	w := newWorld(t)
	k := newFakeKube(KubeState{Reachable: true, Node: "n"})
	n := w.node("i-node1", nil)
	n.kube = k
	a := n.start(t)
	a.waitReady(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !a.Permitted(ctx, FeatureLeakedENIs) {
		t.Error("leaked-ENI collection not permitted with every permission")
	}
	a.waitCondition(t, CondEC2Permissions, true, "every EC2 action the enabled features need is permitted")
	st := a.statusView(ctx).(statusView)
	if len(st.IAM.Missing) != 0 || len(st.IAM.FeaturesOff) != 0 || st.IAM.Checked.IsZero() {
		t.Errorf("/v1/status iam = %+v", st.IAM)
	}
	// Every probe was a DryRun: nothing changed in EC2. Each action is
	// asked once, as a budget grants it: create with tags answers for
	// both CreateNetworkInterface and CreateTags, and the primary ENI's
	// read for DescribeNetworkInterfaces.
	if w.dryRunCount("DeleteNetworkInterface") != 1 || w.dryRunCount("DetachNetworkInterface") != 1 || w.dryRunCount("CreateNetworkInterface") != 1 || w.dryRunCount("DescribeNetworkInterfaces") != 0 {
		t.Errorf("probes: %d deletes, %d detaches, %d creates, %d describes; want one DryRun each, none for describe",
			w.dryRunCount("DeleteNetworkInterface"), w.dryRunCount("DetachNetworkInterface"), w.dryRunCount("CreateNetworkInterface"), w.dryRunCount("DescribeNetworkInterfaces"))
	}
	if w.callCount("DeleteNetworkInterface") != 0 || w.callCount("DetachNetworkInterface") != 0 {
		t.Errorf("%d deletes and %d detaches without DryRun on an idle node", w.callCount("DeleteNetworkInterface"), w.callCount("DetachNetworkInterface"))
	}
}

// With DISABLE_LEAKED_ENI_CLEANUP=true the collector's needs are not
// probed, and with custom networking the subnet check's are.
func TestPreflightProbesOnlyWhatTheSettingsEnable(t *testing.T) {
	a := &Agent{}
	for _, tt := range []struct {
		disableGC, custom bool
		itype             string
		want              []string
	}{
		{false, false, "m5.large", []string{FeatureReadENIs, FeatureGrow, FeatureShrink, FeatureLeakedENIs}},
		{true, true, "m5.large", []string{FeatureReadENIs, FeatureGrow, FeatureShrink, FeatureENIConfig}},
		{true, false, "x9.sim", []string{FeatureReadENIs, FeatureGrow, FeatureShrink, FeatureTypeFromEC2}},
	} {
		a.cfg.DisableLeakedENICleanup, a.cfg.CustomNetwork = tt.disableGC, tt.custom
		var got []string
		for _, f := range a.neededFeatures(tt.itype) {
			got = append(got, f.feature)
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("gc off %v, custom %v, %s: features %q, want %q", tt.disableGC, tt.custom, tt.itype, got, tt.want)
		}
	}
}

// waitNodeEventSaying waits for a Node Event with reason whose message
// contains part: the agent's other Events with the same reason (a refused
// call) may come first.
func waitNodeEventSaying(t *testing.T, k *fakeKube, reason, part string) Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		k.mu.Lock()
		for _, e := range k.events {
			if e.Reason == reason && e.Pod == (ipam.Pod{}) && strings.Contains(e.Message, part) {
				k.mu.Unlock()
				return e
			}
		}
		k.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	t.Fatalf("no %s Event saying %q; Events: %+v", reason, part, k.events)
	return Event{}
}

// Without ec2:DescribeSubnets custom networking cannot learn the
// ENIConfig subnet's zone and CIDR, so pods cannot get addresses: the
// preflight names the action, and the node is not ready, saying why.
func TestCustomNetworkingWithoutDescribeSubnetsIsNamed(t *testing.T) {
	w := newWorldOf(t, strings.Replace(restrictedTopology, "deny: [DeleteNetworkInterface, CreateTags]", "deny: [DescribeSubnets]", 1))
	k := newFakeKube(KubeState{Reachable: true, Node: "n", ENIConfig: foundENIConfig("subnet-pods", "sg-pods")})
	n := w.node("i-node1", customNetworking)
	n.kube = k
	a := n.start(t)
	a.waitCondition(t, CondEC2Permissions, false, "ec2:DescribeSubnets (needed for "+FeatureENIConfig+")")
	a.waitCondition(t, CondENIConfig, false, "UnauthorizedOperation")
	if ready, _ := a.ready.get(); ready {
		t.Error("ready, though pods cannot get addresses")
	}
}
