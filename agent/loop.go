package agent

import (
	"context"
	"errors"
	"time"

	"github.com/vpcnet/vpcnet/agent/executor"
	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/clock"
)

// errStopped answers requests that arrive while the agent shuts down.
var errStopped = errors.New("vpcnetd is shutting down")

// own is the owner goroutine: the only code that touches the node state.
// It performs nothing itself: writes go to the store, jobs to the
// executor, replies to the waiting requests, each on its own goroutine,
// so the owner never waits on disk or network.
func (pt *ownerLoop) own(ctx context.Context, n *nodestate.Node, x *executor.Executor) {
	a := pt.a
	defer close(a.done)
	persist := make(chan nodestate.Persist, 1)
	stored := make(chan struct{})
	go func() {
		defer close(stored)
		a.loop.store(ctx, persist)
	}()
	// A write under way finishes before the owner is done, so Run never
	// returns while the checkpoint file is being replaced.
	defer func() { <-stored }()
	var timer <-chan time.Time
	stop := func() bool { return false }
	defer func() { stop() }()
	var wake time.Time
	for {
		rd := n.Ready()
		a.loop.perform(ctx, rd, persist, x)
		a.loop.publish(ctx, n)
		if !rd.Wake.Equal(wake) {
			stop()
			wake, timer = rd.Wake, nil
			if !wake.IsZero() {
				timer, stop = clock.After(a.clk, max(wake.Sub(a.clk.Now()), 0))
			}
		}
		select {
		case <-ctx.Done():
			a.loop.failPending()
			return
		case ev := <-a.events:
			n.Step(a.clk.Now(), ev)
		case q := <-a.queries:
			q(n)
		case <-timer:
			wake, timer = time.Time{}, nil
			n.Step(a.clk.Now(), nodestate.Tick{})
		}
	}
}

// perform hands Ready's effects to whoever carries them out.
func (pt *ownerLoop) perform(ctx context.Context, rd nodestate.Ready, persist chan<- nodestate.Persist, x *executor.Executor) {
	a := pt.a
	for _, j := range rd.Jobs {
		go func() {
			if !a.spender.granted(ctx, j) {
				return // the agent stops
			}
			ev := x.Run(ctx, j)
			a.loop.countJob(j, ev)
			a.loop.send(ctx, ev)
		}()
	}
	// An Add hears its address before its reply, never after.
	for _, r := range rd.Assigned {
		a.loop.announce(r)
	}
	for _, r := range rd.Replies {
		a.loop.deliver(r)
	}
	for _, nt := range rd.Notices {
		a.kube.Record(Event{Pod: nt.Pod, Warning: nt.Warning, Reason: nt.Reason, Message: nt.Message})
	}
	// The checkpoint write goes out last: every Add waits for it, and
	// the goroutine made ready last is the one Go runs next on the
	// owner's CPU. Handed out first, the write waited behind what the
	// Add's announcement starts (its NetworkPolicy rule write) until
	// another CPU woke to take it: on the benchmark's 2-CPU VM it began
	// 0.8 ms into the Add, and 0.16 ms when handed out last.
	if rd.Persist != nil {
		persist <- *rd.Persist // the machine has at most one write out
	}
}

// store writes checkpoints, one at a time: every change made while one
// is written rides the next, so concurrent Adds share an fsync. The
// owner hears Persisted only after the write returned, with its error:
// the replies waiting for that version leave on it, so reporting early
// or dropping the error would answer Adds the disk does not hold.
func (pt *ownerLoop) store(ctx context.Context, in <-chan nodestate.Persist) {
	a := pt.a
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-in:
			start := a.clk.Now()
			err := a.saveCheckpoint(a.cfg.CheckpointPath(), p.State)
			a.met.checkpointWrite.Observe(a.clk.Now().Sub(start).Seconds())
			if err != nil {
				a.met.checkpointErrors.Inc()
			}
			a.loop.send(ctx, nodestate.Persisted{Version: p.Version, Err: err})
		}
	}
}

// send delivers an event to the owner unless the agent is stopping.
func (pt *ownerLoop) send(ctx context.Context, ev nodestate.Event) bool {
	a := pt.a
	select {
	case a.events <- ev:
		return true
	case <-ctx.Done():
		return false
	case <-a.done:
		return false
	}
}

// answer is what a request hears from the owner: its reply or, for an
// Add whose reply waits for the disk, first the address it is given
// (nodestate.Ready.Assigned).
type answer struct {
	nodestate.Reply
	assigned bool
}

// request sends the event built for a fresh request id and waits for its
// reply. assigned, when not nil, is called on the caller's goroutine
// with an Add's address as soon as the machine has chosen it, while the
// checkpoint that records it is written; the reply may still fail. A
// caller that gives up is cancelled in the machine, where a waiting Add
// still counts as demand.
func (pt *ownerLoop) request(ctx context.Context, build func(id uint64) nodestate.Event, assigned func(nodestate.Reply)) (nodestate.Reply, error) {
	a := pt.a
	// Room for an announcement and the reply (or failPending's error),
	// so the owner never blocks on a request.
	ch := make(chan answer, 2)
	a.mu.Lock()
	a.nextID++
	id := a.nextID
	a.replies[id] = ch
	a.mu.Unlock()
	if !a.loop.send(ctx, build(id)) {
		a.loop.forget(id)
		return nodestate.Reply{}, errors.Join(errStopped, ctx.Err())
	}
	for {
		select {
		case r := <-ch:
			if r.assigned {
				if assigned != nil {
					assigned(r.Reply)
				}
				continue
			}
			return r.Reply, r.Err
		case <-a.done:
			a.loop.forget(id)
			return nodestate.Reply{}, errStopped
		case <-ctx.Done():
			a.loop.forget(id)
			a.loop.send(context.WithoutCancel(ctx), nodestate.Cancel{ID: id})
			return nodestate.Reply{}, ctx.Err()
		}
	}
}

func (pt *ownerLoop) forget(id uint64) {
	a := pt.a
	a.mu.Lock()
	delete(a.replies, id)
	a.mu.Unlock()
}

func (pt *ownerLoop) deliver(r nodestate.Reply) {
	a := pt.a
	a.mu.Lock()
	ch, ok := a.replies[r.ID]
	delete(a.replies, r.ID)
	a.mu.Unlock()
	if ok {
		ch <- answer{Reply: r}
	}
}

// announce hands an Add its address ahead of its reply; the request
// stays registered for the reply.
func (pt *ownerLoop) announce(r nodestate.Reply) {
	a := pt.a
	a.mu.Lock()
	ch, ok := a.replies[r.ID]
	a.mu.Unlock()
	if ok {
		ch <- answer{Reply: r, assigned: true}
	}
}

// failPending answers every request still waiting when the agent stops.
func (pt *ownerLoop) failPending() {
	a := pt.a
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, ch := range a.replies {
		ch <- answer{Reply: nodestate.Reply{ID: id, Err: errStopped}}
		delete(a.replies, id)
	}
}

// query runs f in the owner goroutine and waits for it.
func (pt *ownerLoop) query(ctx context.Context, f func(n *nodestate.Node)) error {
	a := pt.a
	done := make(chan struct{})
	select {
	case a.queries <- func(n *nodestate.Node) { f(n); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-a.done:
		return errStopped
	}
	<-done
	return nil
}

// view is a copy of the node state, or the last published one when the
// owner is not running (before start-up finishes, after it stops).
func (pt *ownerLoop) view(ctx context.Context) (nodestate.View, bool) {
	a := pt.a
	h := a.summary.Load()
	if h == nil {
		return nodestate.View{}, false
	}
	var v nodestate.View
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.loop.query(qctx, func(n *nodestate.Node) { v = n.View(a.clk.Now()) }); err != nil {
		return h.view, true
	}
	return v, true
}

// countJob accounts for one finished job in the metrics.
func (pt *ownerLoop) countJob(j nodestate.Job, ev nodestate.Event) {
	a := pt.a
	if r, ok := ev.(nodestate.ResyncResult); ok {
		res := "ok"
		if r.Err != nil {
			res = "ec2_error"
		}
		a.met.reconcilePasses.WithLabelValues(res).Inc()
		return
	}
	if j.Kind != nodestate.JobAction {
		return
	}
	res := "ok"
	if r, ok := ev.(nodestate.ActionResult); ok {
		switch {
		case r.Err != nil:
			res = "error"
		case r.Skipped:
			res = "skipped"
		}
	}
	a.met.reconcileActions.WithLabelValues(j.Action.Kind.String(), res).Inc()
}
