package agent

import (
	"context"
	"slices"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/clock"
)

// The agent's side of the cluster's EC2 budget (Options.Budget): it asks
// before jobs call EC2 and keeps the machine told of subnet pressure.

// granted waits until the cluster's EC2 budget, if there is one, grants
// calls, the job's (executor.Calls): pods waiting for the job
// (nodestate's Urgent, read afresh at every ask) go before warm-pool
// work. The machine is told once they are granted (nodestate.JobGrant),
// so Adds the addresses the job brings will serve wait for them. It is
// false only when ctx ended or the owner stopped.
func (a *Agent) granted(ctx context.Context, j nodestate.Job, calls []string, tell func(nodestate.Event) bool) bool {
	if len(calls) == 0 {
		return true
	}
	if a.budget != nil {
		need := func() budgetapi.Need {
			h := a.summary.Load()
			if h == nil {
				return budgetapi.Need{}
			}
			return JobNeed(h.view, j.ID)
		}
		if a.budget.Acquire(ctx, calls, need) != nil {
			return false
		}
	}
	return tell(nodestate.JobGrant{JobID: j.ID})
}

// JobNeed is what job id is wanted for as the machine's summary v sees
// it: urgent while pods wait for it, since the longest-waiting of them
// came. A driver that runs its own jobs (the scale driver) asks the same.
func JobNeed(v nodestate.View, id uint64) budgetapi.Need {
	if !slices.Contains(v.Urgent, id) {
		return budgetapi.Need{}
	}
	return budgetapi.Need{Urgent: true, Since: v.WaitingSince}
}

// startupNeed is what start-up's EC2 reads are wanted for: urgently (the
// node is not Ready until they are made), with no pod waiting yet.
func startupNeed() budgetapi.Need { return budgetapi.Need{Urgent: true} }

// watchHolds tells the machine when the budget client starts or stops
// holding EC2 calls for the controller's next leader, so waiting Adds
// wait the failover out (nodestate.BudgetFailover).
func (a *Agent) watchHolds(ctx context.Context) {
	for {
		select {
		case <-a.budget.HoldChanges():
		case <-ctx.Done():
			return
		}
		if !a.send(ctx, nodestate.BudgetFailover{Holding: a.budget.Status().Holding}) {
			return
		}
	}
}

// watchPressure asks the budget controller, every reconcile interval,
// which of the pool's subnets are nearly full, reporting those EC2 found
// out of addresses, and tells the machine when the answer changes.
func (a *Agent) watchPressure(ctx context.Context) {
	var last []string
	for clock.Sleep(a.clk, a.cfg.ReconcileInterval, ctx.Done()) {
		h := a.summary.Load()
		if h == nil {
			continue
		}
		p := a.budget.Pressure(ctx, h.view.Subnets, h.view.Exhausted)
		if slices.Equal(p, last) {
			continue
		}
		if len(p) > 0 {
			a.log.Warn("subnet nearly full: keeping no warm pool and giving back addresses pods do not use", "subnets", p)
		} else if len(last) > 0 {
			a.log.Info("subnet pressure over: warm pool targets back in force")
		}
		last = p
		if !a.send(ctx, nodestate.SubnetPressure{Subnets: p}) {
			return
		}
	}
}
