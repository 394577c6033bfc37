package agent

import (
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// Growth backoff: when EC2 refuses to grow the pool (the subnet is full,
// the instance has no ENI slot left, the account is throttled, a
// permission is missing), asking again on every pass only spends the
// account's API budget: a pod waiting for an address kicks a pass every few
// seconds, on every node. After a refusal, growth waits 5 s, doubling to 2
// minutes, and any growth EC2 accepts resets it. Releases and detaches are
// never held back.
const (
	minGrowBackoff = 5 * time.Second
	maxGrowBackoff = 2 * time.Minute
)

// growBackoff is guarded by the agent's mutex.
type growBackoff struct {
	delay time.Duration
	until time.Time
}

func (b *growBackoff) blocked(now time.Time) bool { return now.Before(b.until) }

// refused records a refusal at now and returns how long growth now waits.
func (b *growBackoff) refused(now time.Time) time.Duration {
	b.delay = min(max(2*b.delay, minGrowBackoff), maxGrowBackoff)
	b.until = now.Add(b.delay)
	return b.delay
}

func (b *growBackoff) reset() { *b = growBackoff{} }

// isRefusal says whether err is EC2 declining to grow the pool, as opposed
// to not answering (which the client already retries with its own backoff).
func isRefusal(err error) bool {
	return cloud.IsSubnetExhausted(err) || cloud.IsAttachmentLimit(err) || cloud.IsAddressLimit(err) ||
		cloud.IsThrottled(err) || cloud.IsUnauthorized(err)
}

func isGrowth(act ipam.Action) bool {
	return act.Kind == ipam.AssignBlocks || act.Kind == ipam.AttachENI
}

func withoutGrowth(actions []ipam.Action) []ipam.Action {
	return slices.DeleteFunc(actions, isGrowth)
}
