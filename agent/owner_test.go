package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/checkpoint/disk"
	"github.com/vpcnet/vpcnet/ipam"
)

// heldWork are Effects that run nothing on their own: the test is the
// owner and runs each piece of work when it chooses, as the simulation
// does.
type heldWork struct {
	work []Work
}

func (h *heldWork) Go(_ context.Context, w Work) { h.work = append(h.work, w) }

func (h *heldWork) Sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// next takes the first piece of work that is a write (write) or a job.
func (h *heldWork) next(write bool) (Work, bool) {
	for i, w := range h.work {
		if (w.Write != nil) == write {
			h.work = append(h.work[:i:i], h.work[i+1:]...)
			return w, true
		}
	}
	return Work{}, false
}

// startHeld starts an agent of WARM_IP_TARGET=2 whose work waits in fx
// until the test runs it; o is its options (its checkpoint's path).
func startHeld(t *testing.T) (a *Agent, fx *heldWork, o Options) {
	t.Helper()
	return startHeldAs(t, newWorld(t).node("i-node1", map[string]string{"WARM_IP_TARGET": "2"}), nil)
}

// startHeldAs starts n's agent, its options changed by edit (if not
// nil), with its work waiting in fx until the test runs it.
func startHeldAs(t *testing.T, n *node, edit func(*Options)) (a *Agent, fx *heldWork, o Options) {
	t.Helper()
	o = n.options(t)
	fx = &heldWork{}
	o.Effects = fx
	if edit != nil {
		edit(&o)
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a, fx, o
}

func TestAnOwnerOnOneThreadHearsItsAddAnsweredOnlyOnceTheWriteHasRun(t *testing.T) {
	a, fx, o := startHeld(t)
	ctx := context.Background()
	tell := func(ev nodestate.Event) bool { a.Step(ctx, ev); return true }
	// The owner's jobs fill the warm pool; nothing runs until the test
	// runs it.
	for i := 0; a.Node().Summary(time.Now()).Stats.Free < 2; i++ {
		if i > 100 {
			t.Fatalf("the warm pool never filled; work left: %d", len(fx.work))
		}
		wk, ok := fx.next(false)
		if !ok {
			wk, ok = fx.next(true)
		}
		if !ok {
			time.Sleep(10 * time.Millisecond) // an attach the emulator delays
			a.Step(ctx, nodestate.Tick{})
			continue
		}
		wk.Run(ctx, tell)
	}
	for wk, ok := fx.next(true); ok; wk, ok = fx.next(true) {
		wk.Run(ctx, tell)
	}
	_, ch := a.Submit(ctx, func(id uint64) nodestate.Event {
		return nodestate.AddRequest{ID: id, Key: key(1), Pod: pod(1)}
	})
	select {
	case r := <-ch:
		t.Fatalf("the Add was answered %+v while its checkpoint write had not run", r)
	default:
	}
	wk, ok := fx.next(true)
	if !ok {
		t.Fatal("the Add handed out no checkpoint write")
	}
	wk.Run(ctx, tell)
	var r nodestate.Reply
	select {
	case r = <-ch:
	default:
		t.Fatal("the Add was not answered once its write had run")
	}
	if r.Err != nil {
		t.Fatalf("Add: %v", r.Err)
	}
	st, err := disk.Load(o.Config.CheckpointPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Entries {
		if e.Key == key(1) && e.Addr == r.Assignment.Addr {
			return
		}
	}
	t.Fatalf("the Add was answered %s, but the checkpoint on disk holds %+v", r.Assignment.Addr, st.Entries)
}

// urgencyAtHandOut records, as each job is handed out, whether the
// summary the EC2 budget reads already says pods wait for it.
type urgencyAtHandOut struct {
	heldWork
	a    *Agent
	seen map[uint64]bool
}

func (u *urgencyAtHandOut) Go(ctx context.Context, w Work) {
	if w.Job != nil {
		h := u.a.summary.Load()
		u.seen[w.Job.ID] = h != nil && slices.Contains(h.view.Urgent, w.Job.ID)
	}
	u.heldWork.Go(ctx, w)
}

// A job asks the budget at once whether pods wait for it: the summary it
// reads must be the one that handed it out. The first fill of an empty
// pool is urgent (the node is not Ready without it); it used to go out
// before the summary that said so, was asked as warm-pool work, and
// waited ten seconds behind a budget controller that had just begun its
// term (make bench-awsnode: agent start to Node Ready 11 s, aws-node 2 s).
func TestAJobIsHandedOutWithTheUrgencyTheBudgetWillRead(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	o := n.options(t)
	fx := &urgencyAtHandOut{seen: map[uint64]bool{}}
	o.Effects = fx
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	fx.a = a
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var fill *nodestate.Job
	for _, wk := range fx.work {
		if j := wk.Job; j != nil && j.Kind == nodestate.JobAction && j.Action.Kind == ipam.AssignBlocks {
			fill = j
		}
	}
	if fill == nil {
		t.Fatalf("start-up handed out no fill of the empty pool: %d pieces of work", len(fx.work))
	}
	if !fx.seen[fill.ID] {
		t.Errorf("the first fill (job %d) went out while the published summary did not call it urgent", fill.ID)
	}
}

// A job whose EC2 calls the cluster's budget grants tells the machine so
// before it calls (nodestate.JobGrant): Adds waiting for the addresses
// it brings then wait for them past their deadline, rather than fail
// moments before they come. Work that calls no EC2 tells nothing extra.
func TestAJobTellsTheMachineOfItsGrantBeforeItsResult(t *testing.T) {
	a, fx, _ := startHeld(t)
	ctx := context.Background()
	sawEC2 := false
	for len(fx.work) > 0 {
		wk := fx.work[0]
		fx.work = fx.work[1:]
		var told []nodestate.Event
		wk.Run(ctx, func(ev nodestate.Event) bool {
			told = append(told, ev)
			a.Step(ctx, ev)
			return true
		})
		if wk.Job == nil {
			continue
		}
		var granted bool
		if len(told) > 0 {
			g, ok := told[0].(nodestate.JobGrant)
			granted = ok && g.JobID == wk.Job.ID
		}
		if len(wk.Calls) == 0 {
			if granted {
				t.Errorf("job %d (%s) calls no EC2, yet told the machine of a grant", wk.Job.ID, wk.Job.Kind)
			}
			continue
		}
		sawEC2 = true
		if !granted || len(told) != 2 {
			t.Errorf("job %d (%s, calls %v) told %+v; want its grant, then its result", wk.Job.ID, wk.Job.Kind, wk.Calls, told)
		}
	}
	if !sawEC2 {
		t.Fatal("no job called EC2; the test meant the warm pool to grow")
	}
}
