// Package scale runs many real node agents against one EC2 emulator whose
// request token buckets are the account's, to measure how a cluster
// scales up against EC2's limits (issue 15).
//
// Each node is what agent/simulation runs for one: the agent's state
// machine (agent/nodestate), its real executor (agent/executor) and a
// production EC2 client (cloud) talking to the emulator (sim) in process,
// with a fake host. All nodes share one manual clock (clock.Manual) and
// one emulator, so the account's buckets, EC2's attach delay and the
// agents' own timers all run in simulated time, and a thousand nodes take
// minutes of wall time.
//
// What does not run in simulated time, and is therefore left out: the EC2
// client's per-process token buckets (golang.org/x/time/rate) and the AWS
// SDK's retryer both wait in wall time, so each node's client makes one
// attempt per call (MaxAttempts 1) and the state machine's own backoff,
// which is on the manual clock, decides when to ask again. In production
// the SDK retries a throttled call up to nine more times (jittered
// exponential backoff) before the machine sees the error, so the
// RequestLimitExceeded counts here are a lower bound on what production
// sees with the same agent. The owner goroutine of agent/ (loop.go) is
// replaced by this package's event loop, as in agent/simulation; start-up
// (agent/startup.go) is followed step by step: IMDS, the instance type's
// limits from the table, EC2's attached ENIs with start-up's backoff, the
// host's routes.
//
// With Options.Budget (vpcnet-scale's default, as the chart installs it)
// every node asks one budget.Ledger, the budget controller's own code,
// before each job that calls EC2 and every reconcile interval for subnet
// pressure, as agent/budget.go does; only the controller's HTTP transport
// is left out (a 5 ms round trip stands in for it).
package scale
