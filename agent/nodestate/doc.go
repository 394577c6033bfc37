// Package nodestate is the agent's state machine: the one owner of a node's
// address pool, who holds what, quarantine, cooldowns, waiting Adds and the
// planner's inputs. It performs no I/O and reads no clock, the way etcd's
// raft core does not: the caller feeds it events (plugin requests, EC2 and
// host results, the checkpoint store's acknowledgements, clock ticks) with
// Step, and collects what it wants done with Ready: a checkpoint to write,
// jobs for EC2 and the host, replies to release, Events to record, and when
// to wake it next.
//
// Ordering rules the caller must keep, and why:
//
//   - Persist before reply. A reply that hands out or takes back an address
//     is in Ready only once the checkpoint version it depends on has been
//     acknowledged with Persisted, so a crash at any instant loses no
//     assignment and never hands one address to two pods. An Add's
//     address is announced earlier, in Assigned, for work that may run
//     beside the write (the pod's NetworkPolicy rules); nothing may tell
//     the pod its address before the Reply.
//   - One write at a time. Ready carries at most one Persist while the last
//     is unacknowledged; changes made meanwhile ride the next one, so many
//     Adds share one fsync (group commit).
//   - Jobs are independent. The caller may run Ready's jobs in any order
//     and concurrently, and report each result with Step; the machine never
//     hands out two jobs that touch the same ENI at once.
//
// Safety the machine keeps on its own: an address the host routes to a pod
// is never given to another pod or released, whatever the checkpoint says
// (it is quarantined instead); blocks leave the pool before EC2 is asked to
// release them, so no pod can be given an address on its way out.
package nodestate
