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
// seed replays exactly.
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
//     bridge's bound pods itself (steps.bind) and runs no controller;
//   - the CNI configuration's write: it goes through the Effects and the
//     Disk, but waits for the socket to serve, which never happens here.
//
// To play schedules, or replay one with a trace of every step:
//
//	go test ./agent/simulation -run TestSimulation -seeds 10000
//	go test ./agent/simulation -run TestSimulation -seed 1234 -v   # replay one
package simulation
