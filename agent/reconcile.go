package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// maxParallelActions bounds how many EC2 mutations of one kind run at once:
// enough to attach several ENIs during a burst without waiting out each
// attach delay in turn, few enough to stay well inside EC2's buckets.
const maxParallelActions = 4

// reconcileLoop is the only goroutine that changes the pool's ENIs and
// blocks through EC2, so two passes never overlap.
func (a *Agent) reconcileLoop(ctx context.Context) {
	tick := time.NewTicker(a.cfg.ReconcileInterval)
	defer tick.Stop()
	resync := true
	for {
		a.reconcile(ctx, resync)
		resync = false
		// Addresses coming out of cooldown change what the planner and
		// readiness see, so wake for that too.
		a.mu.Lock()
		cooled := a.coolingWake(a.pool.Stats(a.now()))
		wait := a.grow.until.Sub(a.now())
		a.mu.Unlock()
		// Growth held back resumes when its backoff ends.
		retry := time.NewTimer(time.Hour)
		if wait > 0 {
			retry.Reset(wait)
		} else {
			retry.Stop()
		}
		select {
		case <-ctx.Done():
			retry.Stop()
			return
		case <-a.kickCh:
		case <-cooled:
		case <-retry.C:
		case <-tick.C:
			resync = true
		}
		retry.Stop()
	}
}

// reconcile is one pass: optionally re-read EC2, re-read the host, plan,
// perform, and update readiness.
func (a *Agent) reconcile(ctx context.Context, resync bool) {
	a.passMu.Lock()
	defer a.passMu.Unlock()
	result := "ok"
	defer func() { a.met.reconcilePasses.WithLabelValues(result).Inc() }()
	if resync {
		if err := a.syncFromEC2(ctx); err != nil {
			a.noteEC2(err)
			result = "ec2_error"
		} else {
			a.noteEC2(nil)
		}
	}
	// Reading every pod route costs a netlink dump; a pass woken by an Add
	// or Del needs it only to release or detach (each of which reads the
	// routes once more right before it acts). Periodic passes always look.
	if resync || a.wouldRelease() {
		if err := a.checkHost(ctx); err != nil {
			a.log.Error("host check failed; nothing will be released this pass", "err", err)
		}
	}
	a.noteKube()
	a.applyENIConfig(ctx)
	a.dropFreePrimaryBlocks()

	a.mu.Lock()
	now := a.now()
	actions, short, waiting := a.planLocked(now, nil)
	customBlocked := a.planCfg.CustomNetworking && !a.eniCfgOK
	held, until := a.grow.blocked(now), a.grow.until
	a.mu.Unlock()

	if customBlocked {
		actions = withoutENIChanges(actions)
	}
	grows := slices.ContainsFunc(actions, isGrowth)
	if grows && held {
		a.log.Debug("growth held back after EC2 refused it", "until", until)
		actions, grows = withoutGrowth(actions), false
	}
	replan := func(inFlight []ipam.ENIState) []ipam.Action {
		a.mu.Lock()
		defer a.mu.Unlock()
		now := a.now()
		if a.grow.blocked(now) {
			return nil
		}
		more, _, _ := a.planLocked(now, inFlight)
		return more
	}
	growErr := a.perform(ctx, actions, replan)
	if growErr != nil {
		result = "action_error"
		a.noteEC2(growErr)
	}
	a.recordGrowth(growErr, short, waiting)
	a.mu.Lock()
	switch {
	case grows && growErr != nil && isRefusal(growErr):
		wait := a.grow.refused(a.now())
		a.log.Warn("EC2 refused to grow the pool; asking again later", "in", wait, "err", growErr)
	case grows && growErr == nil:
		a.grow.reset()
	}
	a.lastShortfall = short
	// While growth is held back, the last refusal still explains an empty
	// pool to pods.
	if grows || growErr != nil {
		a.lastGrowErr = growErr
	}
	a.lastReconcile = a.now()
	a.mu.Unlock()
	a.updateReadiness(ctx)
}

// planLocked is what the planner would do now with the pool as it is,
// waiting Adds counted as demand, and the ENIs in inFlight (attachments
// under way) counted as capacity. It returns the waiting count it used.
func (a *Agent) planLocked(now time.Time, inFlight []ipam.ENIState) ([]ipam.Action, ipam.Shortfall, int) {
	snap := a.pool.Snapshot(now)
	snap.Waiting = a.waiting
	snap.ENIs = append(snap.ENIs, inFlight...)
	actions, short := ipam.Plan(snap, a.planCfg, a.limits, now)
	return actions, short, snap.Waiting
}

// wouldRelease says whether the planner would give anything back now.
func (a *Agent) wouldRelease() bool {
	a.mu.Lock()
	actions, _, _ := a.planLocked(a.now(), nil)
	a.mu.Unlock()
	return slices.ContainsFunc(actions, func(act ipam.Action) bool {
		return act.Kind == ipam.ReleaseBlocks || act.Kind == ipam.DetachENI
	})
}

// noteEC2 records whether EC2 answered, for readiness and /v1/status.
func (a *Agent) noteEC2(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil {
		a.cloudOK = true
		return
	}
	a.lastEC2Err = err.Error()
	a.recordUnauthorized(err)
	// An error with an AWS code is an answer (exhaustion, a limit, a
	// throttle): EC2 is reachable, it said no. Only silence counts against it.
	if cloud.ErrorCode(err) == "" {
		a.cloudOK = false
	}
}

// perform runs the plan in the order the planner documents (see
// ipam.Action): all releases, then assigns, then attaches, then detaches.
// Actions of one kind touch different ENIs, so they run in parallel, a few
// at a time. The first failing kind ends the pass; the next pass plans
// again from what actually happened.
func (a *Agent) perform(ctx context.Context, actions []ipam.Action, replan func([]ipam.ENIState) []ipam.Action) error {
	for _, kind := range []ipam.ActionKind{ipam.ReleaseBlocks, ipam.AssignBlocks, ipam.AttachENI, ipam.DetachENI} {
		var acts []ipam.Action
		for _, act := range actions {
			if act.Kind == kind {
				acts = append(acts, act)
			}
		}
		if len(acts) == 0 {
			continue
		}
		if kind == ipam.AttachENI {
			if err := a.attachPhase(ctx, acts, replan); err != nil {
				return err
			}
			continue
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(maxParallelActions)
		for _, act := range acts {
			a.log.Info("EC2 change", "action", act.Kind.String(), "eni", act.ENIID, "count", act.Count, "blocks", len(act.Blocks), "reason", act.Reason)
			g.Go(func() error { return a.runAction(gctx, act, 0) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// runAction performs one action and accounts for it; a release declined at
// the last moment is not an error.
func (a *Agent) runAction(ctx context.Context, act ipam.Action, dev int) error {
	err := a.do(ctx, act, dev)
	res := "ok"
	if err != nil {
		res = "error"
		if errors.Is(err, errSkipped) {
			res, err = "skipped", nil
		}
	}
	a.met.reconcileActions.WithLabelValues(act.Kind.String(), res).Inc()
	if err != nil {
		a.log.Error("EC2 change failed", "action", act.String(), "err", err)
	}
	return err
}

// errSkipped marks a release the agent declined at the last moment: a pod
// took an address since the snapshot, the host routes to it, or releases
// are on hold.
var errSkipped = errors.New("skipped")

func (a *Agent) do(ctx context.Context, act ipam.Action, dev int) error {
	switch act.Kind {
	case ipam.ReleaseBlocks:
		return a.releaseBlocks(ctx, act)
	case ipam.AssignBlocks:
		return a.assignBlocks(ctx, act)
	case ipam.AttachENI:
		return a.attachENI(ctx, act, dev)
	case ipam.DetachENI:
		return a.detachENI(ctx, act)
	}
	panic(fmt.Sprintf("agent: unknown planner action %v", act.Kind))
}

// freeDevice picks the lowest device index no ENI uses or is being given.
func (a *Agent) freeDevice(taken []int) (int, bool) {
	a.mu.Lock()
	used := append([]int(nil), taken...)
	for _, e := range a.pool.ENIs() {
		used = append(used, e.DeviceIndex)
	}
	max := a.limits.MaxENIs
	a.mu.Unlock()
	return cloud.FreeDeviceIndex(used, max)
}
