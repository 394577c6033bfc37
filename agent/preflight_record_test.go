package agent

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/sim"
)

// dryRuns is how many DryRun requests EC2 has had, every action together.
func (w *world) dryRuns() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := 0
	for _, v := range w.dry {
		k += v
	}
	return k
}

// startPreflighted starts the node's agent and waits until its preflight
// has answered (from the record or by probing) and it is ready.
func startPreflighted(t *testing.T, n *node) *running {
	t.Helper()
	a := n.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !a.Permitted(ctx, FeatureGrow) {
		t.Fatalf("growth not permitted: %+v", a.pre.snapshot())
	}
	a.waitReady(t)
	return a
}

func readRecord(t *testing.T, a *running) preflightRecord {
	t.Helper()
	b, err := os.ReadFile(a.cfg.PreflightPath())
	if err != nil {
		t.Fatalf("preflight record: %v", err)
	}
	var r preflightRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("preflight record %s: %v", b, err)
	}
	return r
}

// Issue 26: a thousand agents restarting at once spent a thousand
// Attach tokens on DryRun probes. A restart within the record's validity
// makes no probe, and says its permissions were vouched for.
func TestARestartWithinTheRecordsValidityMakesNoProbe(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	a := startPreflighted(t, n)
	if w.dryRuns() == 0 {
		t.Fatal("the first start made no DryRun probe")
	}
	r := readRecord(t, a)
	if r.Key.InstanceID != "i-node1" || r.Key.Identity == "" || len(r.Key.Actions) == 0 || r.Key.Version == "" || r.Expires.Sub(r.Checked) != preflightValidity {
		t.Errorf("record %+v: want it keyed by instance, identity, actions and build, valid for %s", r, preflightValidity)
	}
	a.stop()
	before := w.dryRuns()

	b := startPreflighted(t, n)
	if got := w.dryRuns() - before; got != 0 {
		t.Errorf("the restart made %d DryRun probes; a valid record vouches for the permissions", got)
	}
	st := b.pre.snapshot()
	if !st.Recorded || len(st.Missing) != 0 || !st.Checked.Equal(r.Checked) {
		t.Errorf("IAM status after the restart %+v; want the record's pass of %s", st, r.Checked)
	}
	b.waitCondition(t, CondEC2Permissions, true, "recorded")
}

// An expired record vouches for nothing: the next start probes again and
// records the new pass.
func TestAnExpiredRecordProbesAgain(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	a := startPreflighted(t, n)
	a.stop()
	r := readRecord(t, a)
	r.Checked, r.Expires = time.Now().Add(-preflightValidity-time.Hour), time.Now().Add(-time.Hour)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.cfg.PreflightPath(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := w.dryRuns()

	c := startPreflighted(t, n)
	if w.dryRuns() == before {
		t.Error("a start with an expired record made no DryRun probe")
	}
	if st := c.pre.snapshot(); st.Recorded {
		t.Errorf("IAM status %+v comes from the expired record", st)
	}
	if r := readRecord(t, c); !r.Expires.After(time.Now()) {
		t.Errorf("the new pass was not recorded: expires %s", r.Expires)
	}
}

// A real call EC2 refuses as unauthorized means the permissions changed
// since the recorded pass: the record stops vouching, the agent probes
// again at once (so the status and doctor name the action), and the next
// start probes too.
func TestAnUnauthorizedCallInvalidatesTheRecord(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	a := startPreflighted(t, n)
	a.stop()

	b := startPreflighted(t, n)
	if !b.pre.snapshot().Recorded {
		t.Fatal("the restart probed; the test needs one vouched for by the record")
	}
	w.cloud.SetFault("DescribeNetworkInterfaces", sim.Fault{ErrorRate: 1, Code: "UnauthorizedOperation"})
	b.reconcile(context.Background(), true) // the resync reads EC2: refused
	b.waitCondition(t, CondEC2Permissions, false, "ec2:DescribeNetworkInterfaces")
	r := readRecord(t, b)
	if !strings.Contains(r.Invalidated, "UnauthorizedOperation") {
		t.Errorf("record after the refusal: invalidated %q, want the refusal", r.Invalidated)
	}
	w.cloud.SetFault("DescribeNetworkInterfaces", sim.Fault{})
	b.stop()
	before := w.dryRuns()

	startPreflighted(t, n)
	if w.dryRuns() == before {
		t.Error("the start after a refusal made no DryRun probe: the invalidated record still vouched")
	}
}

// With a budget controller the probes are granted before they are made,
// and each action is probed with one call, as a grant counts it: tags on
// create are asked with the create itself, and the primary ENI's real
// read answers for DescribeNetworkInterfaces (they were two calls each).
func TestEveryProbeIsGrantedByTheBudgetController(t *testing.T) {
	w := newWorld(t)
	ctl := newController(t)
	n := w.node("i-node1", map[string]string{"WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "1"})
	n.budget = budgetapi.NewClient(budgetapi.ClientOptions{Node: "i-node1",
		Endpoint: func(context.Context) (string, error) { return ctl.url, nil }})
	a := startPreflighted(t, n)
	a.stop() // no job runs on: the counts below hold still
	w.mu.Lock()
	defer w.mu.Unlock()
	for action, k := range w.dry {
		if made, granted := k+w.calls[action], ctl.count(ctl.granted, action); made > granted {
			t.Errorf("%s: %d calls (%d DryRun), %d granted by the controller", action, made, k, granted)
		}
	}
}

// A role that may not create ENIs at all is told so, not told it lacks
// CreateTags: the create is asked again without tags to tell which.
func TestPreflightTellsAMissingCreateFromMissingTags(t *testing.T) {
	w := newWorldOf(t, strings.Replace(restrictedTopology, "deny: [DeleteNetworkInterface, CreateTags]", "deny: [CreateNetworkInterface]", 1))
	a := w.node("i-node1", nil).start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if a.Permitted(ctx, FeatureGrow) {
		t.Fatal("growth permitted without ec2:CreateNetworkInterface")
	}
	st := a.pre.snapshot()
	if len(st.Missing) != 1 || st.Missing[0].Action != "ec2:CreateNetworkInterface" {
		t.Errorf("missing %+v; want ec2:CreateNetworkInterface alone", st.Missing)
	}
}

// EC2 cannot dry-run AssignPrivateIpAddresses: a probe would find nothing
// and record a pass again, so a refused assign leaves the record alone
// (the machine names the refusal to the pods), where a refused probed
// action voids it.
func TestARefusedActionNoProbeCanAskAboutLeavesTheRecord(t *testing.T) {
	w := newWorld(t)
	a := startPreflighted(t, w.node("i-node1", nil))
	denied := func(action string) error {
		return &smithy.OperationError{ServiceID: "EC2", OperationName: action,
			Err: &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "not authorized to perform: ec2:" + action}}
	}
	a.refused(denied("AssignPrivateIpAddresses"))
	if r := readRecord(t, a); r.Invalidated != "" {
		t.Errorf("a refused AssignPrivateIpAddresses voided the record (%q); no probe can ask about it", r.Invalidated)
	}
	a.refused(denied("AttachNetworkInterface"))
	if r := readRecord(t, a); !strings.Contains(r.Invalidated, "AttachNetworkInterface") {
		t.Errorf("a refused AttachNetworkInterface left the record vouching (invalidated %q)", r.Invalidated)
	}
}
