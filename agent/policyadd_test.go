package agent

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/netpol"
)

// holder holds one call, once armed, until the test releases it with the
// error the call returns; entered hands the test what the call carried.
// close releases whatever is still held; the test's end must call it
// before it stops the agent, whose writes may be held.
type holder struct {
	armed   atomic.Bool
	entered chan any
	release chan error
	gone    chan struct{}
}

func newHolder() *holder {
	return &holder{entered: make(chan any), release: make(chan error), gone: make(chan struct{})}
}

func (h *holder) close() { close(h.gone) }

func (h *holder) hold(v any) error {
	if !h.armed.CompareAndSwap(true, false) {
		return nil
	}
	select {
	case h.entered <- v:
	case <-h.gone:
		return errors.New("test over")
	}
	select {
	case err := <-h.release:
		return err
	case <-h.gone:
		return errors.New("test over")
	}
}

// held waits for the armed call to be held and returns what it carried.
func (h *holder) held(t *testing.T, what string) any {
	t.Helper()
	select {
	case v := <-h.entered:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never began", what)
		return nil
	}
}

type addResult struct {
	reply *agentapi.AddReply
	err   error
}

// addAsync starts an Add; its result arrives on the channel.
func addAsync(c *agentapi.Client, container, podName string) <-chan addResult {
	out := make(chan addResult, 1)
	go func() {
		r, err := c.Add(context.Background(), &agentapi.AddRequest{Attachment: web(container), PodNamespace: "default", PodName: podName})
		out <- addResult{r, err}
	}()
	return out
}

func noAnswerYet(t *testing.T, add <-chan addResult, why string) {
	t.Helper()
	select {
	case r := <-add:
		t.Fatalf("the Add answered (%v, %v) while %s", r.reply, r.err, why)
	case <-time.After(300 * time.Millisecond):
	}
}

func answered(t *testing.T, add <-chan addResult) addResult {
	t.Helper()
	select {
	case r := <-add:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the Add never answered")
		return addResult{}
	}
}

// heldPolicyNode is a node enforcing denyAllIn("default") on pods
// labelled app=db, whose checkpoint writes and rule writes a test can
// hold: disk holds the write recording an attachment of container
// holdContainer, rules the write isolating rules.holdPod.
type heldPolicyNode struct {
	*running
	c             *agentapi.Client
	rules         *fakePolicyRules
	disk          *holder
	holdContainer atomic.Value // string
}

func newHeldPolicyNode(t *testing.T) *heldPolicyNode {
	src := &fakePolicySource{}
	db := map[string]string{"app": "db"}
	src.c = netpol.Cluster{Policies: []*networkingv1.NetworkPolicy{denyAllIn("default")},
		Pods: []netpol.Pod{{Namespace: "default", Name: "db", Labels: db}, {Namespace: "default", Name: "db-2", Labels: db}}}
	src.synced.Store(true)
	h := &heldPolicyNode{rules: newFakePolicyRules(), disk: newHolder()}
	h.rules.hold = newHolder()
	h.holdContainer.Store("")
	n := newWorld(t).node("i-node1", nil)
	n.policy = PolicyOptions{Source: src, Rules: h.rules, Mode: netpol.Standard, SyncWait: 200 * time.Millisecond}
	n.disk = heldDisk{h: h}
	h.running = n.start(t)
	// Cleanups run last first: this one before the agent stops.
	t.Cleanup(func() { h.disk.close(); h.rules.hold.close() })
	h.waitReady(t)
	h.c = &agentapi.Client{Socket: n.env["VPCNET_SOCKET"]}
	return h
}

// heldDisk is the node's file system, but for the checkpoint write its
// node holds (heldPolicyNode.arm).
type heldDisk struct {
	files
	h *heldPolicyNode
}

var _ Disk = heldDisk{}

func (d heldDisk) Save(path string, st checkpoint.State) error {
	if slices.ContainsFunc(st.Entries, func(e checkpoint.Entry) bool { return e.Key.ContainerID == d.h.holdContainer.Load() }) {
		if err := d.h.disk.hold(st); err != nil {
			return err
		}
	}
	return files{}.Save(path, st)
}

// arm holds the next checkpoint write recording container and the next
// rule write isolating pod.
func (h *heldPolicyNode) arm(container, pod string) {
	h.holdContainer.Store(container)
	h.rules.mu.Lock()
	h.rules.holdPod = pod
	h.rules.mu.Unlock()
	h.disk.armed.Store(true)
	h.rules.hold.armed.Store(true)
}

// addressOf is pod's address in a held rule write.
func addressOf(t *testing.T, v any, pod string) string {
	t.Helper()
	for _, r := range v.(netpol.Ruleset).Pods {
		if r.Pod.Name == pod {
			return r.Pod.IP.String()
		}
	}
	t.Fatalf("the held write has no rules for %s", pod)
	return ""
}

// The Add waits for the longer of its checkpoint write and its pod's
// rule write, not their sum: the rules are written while the checkpoint
// is. It still answers only once both are done, whichever ends last.
func TestAPodsRulesAreWrittenWhileItsCheckpointIsAndItsAddWaitsForBoth(t *testing.T) {
	h := newHeldPolicyNode(t)

	h.arm("c1", "db")
	add := addAsync(h.c, "c1", "db")
	h.disk.held(t, "the checkpoint write of the Add")
	held := h.rules.hold.held(t, "the pod's rule write, while its checkpoint is being written,")
	addr := addressOf(t, held, "db")
	h.rules.hold.release <- nil
	noAnswerYet(t, add, "its address was not yet on disk")
	h.disk.release <- nil
	if r := answered(t, add); r.err != nil || r.reply.Address != addr {
		t.Fatalf("Add = %v, %v; want %s, the address its rules were written for", r.reply, r.err, addr)
	}

	// The rules last this time: the Add waits for them.
	h.arm("c2", "db-2")
	add = addAsync(h.c, "c2", "db-2")
	h.disk.held(t, "the checkpoint write of the second Add")
	held = h.rules.hold.held(t, "the second pod's rule write")
	addr = addressOf(t, held, "db-2")
	h.disk.release <- nil
	noAnswerYet(t, add, "its pod's rules were not yet written")
	h.rules.hold.release <- nil
	r := answered(t, add)
	if r.err != nil || r.reply.Address != addr {
		t.Fatalf("second Add = %v, %v; want %s", r.reply, r.err, addr)
	}
	if in, _ := h.rules.isolated(addr); !in {
		t.Fatalf("when the Add answered, %s was not isolated", addr)
	}
}

// A failed rule write fails the Add. The address it took goes back, and
// so do the rules kept for it; an address an earlier ADD holds stays.
func TestAFailedRuleWriteFailsTheAddAndGivesBackOnlyTheAddressItTook(t *testing.T) {
	h := newHeldPolicyNode(t)

	h.arm("", "db") // the rules only
	add := addAsync(h.c, "c1", "db")
	addr := addressOf(t, h.rules.hold.held(t, "the pod's rule write"), "db")
	h.rules.hold.release <- errors.New("nf_tables: no memory")
	if r := answered(t, add); agentapi.CodeOf(r.err) != agentapi.Unavailable {
		t.Fatalf("Add whose rules failed = %v, %v; want Unavailable", r.reply, r.err)
	}
	if _, held := h.lookup(attachment("c1")); held {
		t.Fatal("the address of an Add whose rules failed is still held")
	}
	// The next write, with a pod no policy selects, leaves the failed
	// pod's address out.
	if r := answered(t, addAsync(h.c, "c2", "web")); r.err != nil {
		t.Fatal(r.err)
	}
	waitNotIsolated(t, h.rules, addr)

	// An earlier ADD's address survives its retry's failure.
	if r := answered(t, addAsync(h.c, "c3", "db-2")); r.err != nil {
		t.Fatal(r.err)
	}
	h.arm("", "db-2")
	add = addAsync(h.c, "c3", "db-2")
	h.rules.hold.held(t, "the repeated Add's rule write")
	h.rules.hold.release <- errors.New("nf_tables: no memory")
	if r := answered(t, add); r.err == nil {
		t.Fatal("a repeated Add whose rules failed succeeded")
	}
	if _, held := h.lookup(attachment("c3")); !held {
		t.Fatal("a repeated Add whose rules failed gave back the address an earlier ADD holds")
	}
}

// A checkpoint write that fails takes the Add's address back, and the
// rules written for it meanwhile go.
func TestAnAddWhoseCheckpointFailsLeavesNoRulesForItsAddress(t *testing.T) {
	h := newHeldPolicyNode(t)

	h.arm("c1", "db")
	add := addAsync(h.c, "c1", "db")
	h.disk.held(t, "the checkpoint write of the Add")
	addr := addressOf(t, h.rules.hold.held(t, "the pod's rule write"), "db")
	h.rules.hold.release <- nil
	h.disk.release <- errors.New("write checkpoint: no space left on device")
	if r := answered(t, add); r.err == nil {
		t.Fatalf("Add whose checkpoint failed = %v; want an error", r.reply)
	}
	if _, held := h.lookup(attachment("c1")); held {
		t.Fatal("the address of an Add whose checkpoint failed is still held")
	}
	waitNotIsolated(t, h.rules, addr)
}

// attachment is the key of web(container).
func attachment(container string) ipam.Key {
	return ipam.Key{Network: "aws-cni", ContainerID: container, IfName: "eth0"}
}

func waitNotIsolated(t *testing.T, rules *fakePolicyRules, addr string) {
	t.Helper()
	rules.waitFor(t, "rules without "+addr+", whose Add failed", func(rs netpol.Ruleset) bool {
		in, eg := isolatedIn(rs, addr)
		return !in && !eg
	})
}
