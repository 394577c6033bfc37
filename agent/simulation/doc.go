// Package simulation runs vpcnetd's own shell (package agent: its
// start-up, its owner, its checkpoint store, its executor) against the
// local cloud's EC2 emulator, a fake host and a disk kept in memory, all
// on one manual clock, through seeded random schedules: pod ADDs and DELs
// with kubelet's retries and the plugin's own wiring time, agent crashes
// at any step and restarts from a kept, lost, older or corrupted
// checkpoint, DELs while the agent is down, EC2 throttling and 5xx,
// actions that succeed but report failure, failing host reads, checkpoint
// writes that fail or stall, and time jumps. The invariants of DESIGN.md
// ("The agent's shape") are checked after every step and whenever the
// agent's work tells it something; a schedule runs in milliseconds and a
// seed replays exactly (TestScheduleReplaysIdentically).
//
// Each seed plays on one of several nodes (worlds.go, seed mod their
// number): secondary addresses on one subnet; prefix delegation on a
// subnet EC2 fragments, so the agent falls back to single addresses;
// tagged subnet discovery among subnets eligible and not (tagged 0,
// tagged for another cluster, untagged, another zone); a type with two
// network cards launched with an EFA interface and an ENI tagged
// no_manage. Besides I1-I7 they add:
//
//   - I8: an interface vpcnet must not manage keeps its attachment and
//     its addresses, and no pod is given one of them;
//   - I9: every ENI vpcnet attaches is in a subnet it may use;
//   - I10: once quiet, every secondary ENI carries a live pod's address
//     or is needed for the warm target (bound pods are the live ones by
//     then); checked where the target is WARM_ENI_TARGET, not with
//     prefixes, whose free-/28 count the check would have to re-derive;
//   - I11: no EC2 call outside a grant while the budget controller
//     answers: half the seeds run a controller (budget.go), reached by
//     vpcnetd's own client, that answers, is unreachable, fails over
//     (503 not-leader) or has no leader, and changes now and then; a
//     call the work making it was not granted, made while the client
//     asks the controller (not gone alone after a failure), breaks it.
//
// The schedule is the agent's owner (agent.Start, then Step and Submit)
// and its Effects (proc.go): the jobs, checkpoint writes and chores the
// owner hands out wait until the schedule runs them, and a crash runs
// each of them, part of it or none. What vpcnetd runs and the schedule
// does not, and why:
//
//   - the owner goroutine and its channels (own, send, request, query):
//     a driver on one thread is the owner itself; requests go through the
//     same reply routing (Submit), without the wait;
//   - the plugin socket and what its Add and Del do around the request
//     (hostPorts, NetworkPolicy): a gRPC server on goroutines; the
//     schedule makes the plugin's requests as the socket hands them on,
//     and an Add's address announced before its reply (which starts its
//     rule write beside the checkpoint's) reaches no one;
//   - the Kubernetes bridge, the IAM preflight, the budget client's
//     pressure watch and the HTTP views: loops on goroutines that wait on
//     the clock or the network; the schedule hands the state machine the
//     bridge's bound pods itself (steps.bind). The budget client's
//     Acquire runs, but its controller never answers with a wait or a
//     deferral: the client waits on clock timers, which nothing fires
//     while the one thread waits. Preflight with permissions missing is
//     not run for the same reason (it loops on its own goroutine);
//     EC2 refusing calls as UnauthorizedOperation is not injected
//     either, so what the machine does with an unauthorized refusal is
//     left to agent/preflight_test.go and nodestate's tests;
//   - the burst bound ("a burst never makes the agent hold more than the
//     pods that can exist plus its warm target") at every step: bursts
//     of bound pods run (steps.bind binds up to 19 pods not added yet)
//     and I10 checks the ENIs they leave once quiet, but on these nodes
//     of 12 to 16 addresses per pool the per-step bound is met by the
//     instance's limits alone, so it would prove nothing; it needs a
//     world with more addresses than max pods (left undone for time);
//   - the CNI configuration's write: it goes through the Effects and the
//     Disk, but waits for the socket to serve, which never happens here.
//
// To play schedules, or replay one with a trace of every step:
//
//	go test ./agent/simulation -run TestSimulation -seeds 10000
//	go test ./agent/simulation -run TestSimulation -seed 1234 -v   # replay one
package simulation
