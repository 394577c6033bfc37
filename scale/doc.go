// Package scale runs many real node agents against one EC2 emulator whose
// request token buckets are the account's, to measure how a cluster
// scales up against EC2's limits (issue 15).
//
// Each node runs vpcnetd's own shell (package agent), as agent/simulation
// does for one: its start-up (agent.Start: IMDS, the type's limits, the
// checkpoint, EC2's attached ENIs, the host's routes), its owner (Step,
// with the state machine of agent/nodestate), its checkpoint store and
// its executor (agent/executor), with a production EC2 client (cloud)
// talking to the emulator (sim) in process, a fake host and a checkpoint
// kept in memory. All nodes share one manual clock (clock.Manual) and one
// emulator, so the account's buckets, EC2's attach delay and the agents'
// own timers all run in simulated time, and a thousand nodes take minutes
// of wall time.
//
// What does not run in simulated time, and is therefore left out: the EC2
// client's per-process token buckets (golang.org/x/time/rate) and the AWS
// SDK's retryer both wait in wall time, so each node's client makes one
// attempt per call (MaxAttempts 1) and the state machine's own backoff,
// which is on the manual clock, decides when to ask again. In production
// the SDK retries a throttled call up to nine more times (jittered
// exponential backoff) before the machine sees the error, so the
// RequestLimitExceeded counts here are a lower bound on what production
// sees with the same agent. The driver's event queue is each agent's
// owner and its Effects (node.go): a checkpoint write lands at once and
// is acknowledged a millisecond later, a job answers after its calls'
// latency, and a start-up that fails is started again with start-up's
// backoff, since nothing on the queue can wait.
//
// The agents run production's settings (config's defaults: subnet
// discovery on, among others) unless Options.Settings changes them, and
// vpcnetd's IAM preflight after start-up (Options.NoPreflight leaves it
// out): the DryRun probes, asked of the budget controller as warm-pool
// work, or nothing at all when the node's record of a passed preflight
// is still valid, as after a restart (agent/preflight_record.go). The
// report says which settings ran, and counts DryRun probes apart from
// the calls that change something.
//
// With Options.Budget (vpcnet-scale's default, as the chart installs it)
// every node asks one budget.Ledger, the budget controller's own code,
// before each job that calls EC2 and every reconcile interval for subnet
// pressure, as agent/budget.go does; only the controller's HTTP transport
// is left out (a 5 ms round trip stands in for it). The agent's own side
// of the budget (agent/budget.go, budgetapi.Client) does not run here:
// its Acquire waits until the controller grants, and nothing on the event
// queue can wait, so the driver asks the ledger itself, in its Effects,
// as the client does (scale/failover.go: the refusals to report, going
// alone on the node's own buckets, holding jobs through a failover). In
// the failover scenario the controller is two replicas electing a
// leader on a Lease with client-go's timings, and the leader dies
// mid-join.
package scale
