package nodestate

import (
	"math"
	"time"
)

// A burst of pods (a Deployment scaled up, a node filled by the
// scheduler) reaches the agent as Adds spread over a few seconds: the
// runtime starts one plugin process per pod. Growing the pool only for
// the Adds already waiting starts one attachment, then another a second
// later for the next wave, and the last pod waits for the last
// attachment: up to twice the attach delay. The machine instead counts
// the Adds it expects within one attach delay at the rate they have been
// arriving, and starts every attachment for them at once.
//
// The rate is that of every new Add, not only of those that found the
// pool empty: a fresh node's warm addresses serve a burst's first Adds,
// and waiting for the first Add to find none started the attachments a
// second late (1.23 attach delays for 100 pods on an m5.4xlarge in make
// bench). Attachments start as soon as the free addresses are projected
// to run out within one attach delay.
const (
	// arrivalWindow is how far back the arrival rate is measured.
	arrivalWindow = time.Second
	// attachGuess stands for the attach delay until one was observed:
	// EC2 takes seconds to attach an ENI.
	attachGuess = 5 * time.Second
	// A burst is at least minBurstArrivals Adds spread over at least
	// minBurstSpan, the last no longer than burstQuiet ago.
	minBurstArrivals = 3
	minBurstSpan     = 50 * time.Millisecond
	burstQuiet       = 250 * time.Millisecond
	// Before any Add waits, the projection needs minProjectArrivals
	// Adds within arrivalWindow: a few Adds close together are what a
	// steady churn of 5 pods a second looks like on a loaded machine,
	// and a rate taken from three of them made make bench's churn
	// attach an ENI it did not need (3 mutating EC2 calls where the
	// goal is none). A burst of 100 pods brings 10 within a few hundred
	// milliseconds.
	minProjectArrivals = 10
)

type burst struct {
	// arrivals are when new Adds came (not retries of an Add already
	// answered), within arrivalWindow.
	arrivals []time.Time
	// attachTook is the last attachment's duration, from EC2's answer
	// to the attach to the ENI being seen attached.
	attachTook time.Duration
}

// arrived records a new Add, whether or not it found a free address.
func (b *burst) arrived(now time.Time) {
	b.prune(now)
	b.arrivals = append(b.arrivals, now)
}

func (b *burst) prune(now time.Time) {
	i := 0
	for i < len(b.arrivals) && now.Sub(b.arrivals[i]) > arrivalWindow {
		i++
	}
	b.arrivals = b.arrivals[i:]
}

// anticipated is how many more Adds are expected before an attachment
// started now lands, when those would run the free addresses out or
// Adds already wait; none otherwise, since then the pool keeps up and
// its warm targets are enough. The rate is measured over the span the
// recent Adds arrived in, and only while they still arrive: Adds that
// all came at one instant (a restart of the runtime, a retry wave) show
// no burst still on its way.
func (b *burst) anticipated(now time.Time, waiting, free int) int {
	b.prune(now)
	k := len(b.arrivals)
	if k < minBurstArrivals {
		return 0
	}
	first, last := b.arrivals[0], b.arrivals[k-1]
	span := last.Sub(first)
	if span < minBurstSpan || now.Sub(last) > burstQuiet {
		return 0
	}
	d := b.attachTook
	if d <= 0 {
		d = attachGuess
	}
	rate := float64(k-1) / span.Seconds()
	ahead := int(math.Ceil(rate * d.Seconds()))
	if waiting == 0 && (ahead <= free || k < minProjectArrivals) {
		return 0
	}
	return ahead
}

// expectedAttach is how long an attachment is expected to take: the last
// one seen, unless IMDS's lag made that one look slower than EC2's
// usual (a confirmation that waited for IMDS measures IMDS, not EC2).
func (b *burst) expectedAttach() time.Duration {
	if b.attachTook > 0 && b.attachTook < attachGuess {
		return b.attachTook
	}
	return attachGuess
}
