// Package simulation runs the agent's state machine (agent/nodestate) and
// its real executor against the local cloud's EC2 emulator, a fake host and
// a fake disk, all on one manual clock, through seeded random schedules:
// pod ADDs and DELs with kubelet's retries, agent crashes at any step and
// restarts from a kept, lost, older or corrupted checkpoint, DELs while the
// agent is down, EC2 throttling and 5xx, actions that succeed but report
// failure, failing host reads and checkpoint writes, and time jumps. The
// invariants of DESIGN.md ("The agent's shape") are checked after every
// step; a schedule runs in milliseconds and a seed replays exactly.
//
//	go test ./agent/simulation -run TestSimulation -seeds 10000
//	go test ./agent/simulation -run TestSimulation -seed 1234 -v   # replay one
package simulation
