package agent

import (
	"context"
	"errors"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/clock"
)

// errStopped answers requests that arrive while the agent shuts down.
var errStopped = errors.New("vpcnetd is shutting down")

// The owner is the only code that touches the node state once start-up
// has built it. It takes one event at a time (Step) and hands out what
// the state machine then wants (settle); it performs nothing itself, so
// it never waits on disk or network. In vpcnetd the owner is a goroutine
// (own) fed by a channel; a driver that runs the agent on one thread,
// such as the simulation, is the owner itself and calls Step.

// own is vpcnetd's owner goroutine. Start-up settled the state machine
// once already; from then on every event, query and tick goes through
// here.
func (a *Agent) own(ctx context.Context) {
	defer close(a.done)
	// A write under way finishes before the owner is done, so Run never
	// returns while the checkpoint file is being replaced.
	defer a.writes.Wait()
	var timer <-chan time.Time
	stop := func() bool { return false }
	defer func() { stop() }()
	var armed time.Time
	for {
		if !a.wake.Equal(armed) {
			stop()
			armed, timer = a.wake, nil
			if !armed.IsZero() {
				timer, stop = clock.After(a.clk, max(armed.Sub(a.clk.Now()), 0))
			}
		}
		select {
		case <-ctx.Done():
			a.replies.failAll(errStopped)
			return
		case ev := <-a.events:
			a.Step(ctx, ev)
		case q := <-a.queries:
			q(a.node)
			a.settle(ctx)
		case <-timer:
			armed, timer = time.Time{}, nil
			a.Step(ctx, nodestate.Tick{})
		}
	}
}

// Step is the owner taking one event: the state machine steps at the
// clock's now, and what it then wants is handed out. Only the owner calls
// it: vpcnetd's owner goroutine, or a driver that runs the agent on one
// thread after Start (the simulation, the scale driver).
func (a *Agent) Step(ctx context.Context, ev nodestate.Event) {
	a.node.Step(a.clk.Now(), ev)
	a.settle(ctx)
}

// settle publishes what readers that must not wait for the owner see,
// then hands Ready's effects to whoever carries them out: the jobs and
// the write to the Effects, the announced addresses and the replies to
// the requests that wait (the machine releases a reply only once what it
// promises is on disk), the notices to the Kubernetes layer; and it
// notes when the machine wants a Tick.
func (a *Agent) settle(ctx context.Context) {
	rd := a.node.Ready()
	// Published before the jobs go out: a job asks the EC2 budget at once
	// whether pods wait for it, and reads that here. Published after, the
	// first fill of an empty pool was asked as warm-pool work and waited
	// ten seconds behind a budget controller's reserve.
	a.publish(ctx)
	for _, j := range rd.Jobs {
		a.fx.Go(ctx, a.job(j))
	}
	// An Add hears its address before its reply, never after: it starts
	// its pod's NetworkPolicy rule write while the checkpoint below is
	// written, and still answers only once both are done (rpcServer.Add).
	for _, r := range rd.Assigned {
		a.replies.announce(r)
	}
	for _, r := range rd.Replies {
		a.replies.deliver(r)
	}
	for _, nt := range rd.Notices {
		a.kube.Record(Event{Pod: nt.Pod, Warning: nt.Warning, Reason: nt.Reason, Message: nt.Message})
	}
	// The checkpoint write goes out last: every Add waits for it, and
	// the goroutine made ready last is the one Go runs next on the
	// owner's CPU. Handed out first, the write waited behind what the
	// Add's announcement starts (its rule write) until another CPU woke
	// to take it: on the benchmark's 2-CPU VM it began 0.8 ms into the
	// Add, and 0.16 ms when handed out last. The machine has at most one
	// write out, and the replies above are for versions already on disk,
	// so the order means nothing to it.
	if rd.Persist != nil {
		a.fx.Go(ctx, a.write(*rd.Persist))
	}
	a.wake = rd.Wake
}

// write is the checkpoint store's work for one version. The machine hands
// out one write at a time and every change made while one is written
// rides the next, so concurrent Adds share an fsync. The owner hears
// Persisted only after the disk returned, with its error: the replies
// waiting for that version leave on it, so reporting early or dropping
// the error would answer Adds the disk does not hold.
func (a *Agent) write(p nodestate.Persist) Work {
	a.writes.Add(1)
	return Work{Write: &p, Run: func(ctx context.Context, tell func(nodestate.Event) bool) {
		defer a.writes.Done()
		start := a.clk.Now()
		err := a.disk.Save(a.cfg.CheckpointPath(), p.State)
		a.met.checkpointWrite.Observe(a.clk.Now().Sub(start).Seconds())
		if err != nil {
			a.met.checkpointErrors.Inc()
		}
		tell(nodestate.Persisted{Version: p.Version, Err: err})
	}}
}

// job is the work of one EC2 or host job: the cluster's budget grants its
// calls, the executor runs it, the owner hears the result.
func (a *Agent) job(j nodestate.Job) Work {
	calls := a.x.Calls(j)
	return Work{Job: &j, Calls: calls, Run: func(ctx context.Context, tell func(nodestate.Event) bool) {
		if !a.granted(ctx, j, calls, tell) {
			return // the agent stops
		}
		ev := a.x.Run(ctx, j)
		a.countJob(j, ev)
		a.refused(resultErr(ev))
		tell(ev)
	}}
}

// resultErr is the error a job's result carries, if any.
func resultErr(ev nodestate.Event) error {
	switch r := ev.(type) {
	case nodestate.ResyncResult:
		return r.Err
	case nodestate.HostResult:
		return r.Err
	case nodestate.ActionResult:
		return r.Err
	case nodestate.AttachResult:
		return r.Err
	case nodestate.DOTResult:
		return r.Err
	case nodestate.DeleteResult:
		return r.Err
	}
	return nil
}

// Submit is a plugin request made by a driver that is the owner itself:
// it registers the request under a fresh id, steps the event built for it
// and returns where its reply arrives (it may be there already). vpcnetd's
// requests come from the plugin socket's goroutines and wait in request.
func (a *Agent) Submit(ctx context.Context, build func(id uint64) nodestate.Event) (uint64, <-chan nodestate.Reply) {
	id, ch := a.replies.open()
	a.Step(ctx, build(id))
	return id, ch
}

// Wake is when the owner wants a Tick next (zero: never), for a driver
// that is the owner and keeps its own timers.
func (a *Agent) Wake() time.Time { return a.wake }

// Node is the state machine, for a driver that is the owner (it checks
// invariants against it between steps). Nothing else may touch it.
func (a *Agent) Node() *nodestate.Node { return a.node }

// send delivers an event to the owner unless the agent is stopping.
func (a *Agent) send(ctx context.Context, ev nodestate.Event) bool {
	select {
	case a.events <- ev:
		return true
	case <-ctx.Done():
		return false
	case <-a.done:
		return false
	}
}

// request sends the event built for a fresh request id and waits for its
// reply. assigned, when not nil, is called on the caller's goroutine
// with an Add's address as soon as the machine has chosen it, while the
// checkpoint that records it is written; the reply may still fail. A
// caller that gives up is cancelled in the machine, where a waiting Add
// still counts as demand.
func (a *Agent) request(ctx context.Context, build func(id uint64) nodestate.Event, assigned func(nodestate.Reply)) (nodestate.Reply, error) {
	var id uint64
	var ch, announced <-chan nodestate.Reply
	if assigned != nil {
		id, ch, announced = a.replies.openAdd()
	} else {
		id, ch = a.replies.open()
	}
	if !a.send(ctx, build(id)) {
		a.replies.forget(id)
		return nodestate.Reply{}, errors.Join(errStopped, ctx.Err())
	}
	for {
		select {
		case r := <-announced:
			assigned(r)
			announced = nil // at most one
		case r := <-ch:
			return r, r.Err
		case <-a.done:
			a.replies.forget(id)
			return nodestate.Reply{}, errStopped
		case <-ctx.Done():
			a.replies.forget(id)
			a.send(context.WithoutCancel(ctx), nodestate.Cancel{ID: id})
			return nodestate.Reply{}, ctx.Err()
		}
	}
}

// query runs f in the owner goroutine and waits for it.
func (a *Agent) query(ctx context.Context, f func(n *nodestate.Node)) error {
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
func (a *Agent) view(ctx context.Context) (nodestate.View, bool) {
	h := a.summary.Load()
	if h == nil {
		return nodestate.View{}, false
	}
	var v nodestate.View
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.query(qctx, func(n *nodestate.Node) { v = n.View(a.clk.Now()) }); err != nil {
		return h.view, true
	}
	return v, true
}

// countJob accounts for one finished job in the metrics.
func (a *Agent) countJob(j nodestate.Job, ev nodestate.Event) {
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
