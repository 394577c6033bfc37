package simulation

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/agent/nodestate"
)

// agentProc is one run of the agent process: vpcnetd's own agent, whose
// owner the schedule is, and the work its owner handed out that has not
// run. It is the agent's Effects: work waits here until the schedule runs
// it, and a crash decides what of it ran.
type agentProc struct {
	ag *agent.Agent
	// jobs are the EC2 and host jobs handed out, write the checkpoint
	// write (the machine has at most one out), chores the rest (the CNI
	// configuration's write).
	jobs   []agent.Work
	write  *agent.Work
	chores []agent.Work
	// wait is start-up waiting between its tries: the world moves on.
	wait func(time.Duration)
	// err is the first way the agent broke the Effects' contract.
	err error
	// replies are the requests made and not answered yet.
	replies map[uint64]waiter
	// i3 is set while a restart with no pod change must make no
	// mutating EC2 call; i3Base is the count at the restart.
	i3     bool
	i3Base int
}

// waiter is a pod's request waiting for the agent's reply.
type waiter struct {
	name string
	ch   <-chan nodestate.Reply
}

var _ agent.Effects = (*agentProc)(nil)

func (p *agentProc) Go(_ context.Context, w agent.Work) {
	switch {
	case w.Write != nil:
		if p.write != nil && p.err == nil {
			p.err = fmt.Errorf("two checkpoint writes handed out at once (%d and %d)", p.write.Write.Version, w.Write.Version)
		}
		p.write = &w
	case w.Job != nil:
		p.jobs = append(p.jobs, w)
	default:
		p.chores = append(p.chores, w)
	}
}

// Sleep is start-up waiting to try again: on one thread, time passes
// instead.
func (p *agentProc) Sleep(_ context.Context, d time.Duration) bool {
	p.wait(d)
	return true
}

// pending are the requests waiting, in the order they were made.
func (p *agentProc) pending() []uint64 {
	ids := make([]uint64, 0, len(p.replies))
	for id := range p.replies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// dead is what a crashed process hears: nothing, and nobody hears it.
func dead(nodestate.Event) bool { return false }
