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
const (
	// arrivalWindow is how far back the arrival rate is measured.
	arrivalWindow = time.Second
	// attachGuess stands for the attach delay until one was observed:
	// EC2 takes seconds to attach an ENI.
	attachGuess = 5 * time.Second
	// A burst is at least minBurstArrivals waiting Adds spread over at
	// least minBurstSpan, the last no longer than burstQuiet ago.
	minBurstArrivals = 3
	minBurstSpan     = 50 * time.Millisecond
	burstQuiet       = 250 * time.Millisecond
)

type burst struct {
	// arrivals are when Adds that found no free address came, within
	// arrivalWindow.
	arrivals []time.Time
	// attachTook is the last attachment's duration, from EC2's answer
	// to the attach to the ENI being seen attached.
	attachTook time.Duration
}

// waited records an Add that found the pool empty.
func (b *burst) waited(now time.Time) {
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
// started now lands, while Adds are waiting: none when none wait, since
// then the pool keeps up and its warm targets are enough. The rate is
// measured over the span the recent waiting Adds arrived in, and only
// while they still arrive: Adds that all came at one instant (a restart
// of the runtime, a retry wave) show no burst still on its way.
func (b *burst) anticipated(now time.Time, waiting int) int {
	if waiting == 0 {
		return 0
	}
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
	// The rate comes from at most arrivalWindow and is extrapolated over
	// an attach delay, several times longer: 11 Adds 5 ms apart made a
	// thousand, and a burst of 40 pods attached every ENI of an
	// m5.4xlarge. All that is known of a burst's length is how long it
	// has lasted, and a burst seen for a span is as likely to end within
	// as long again as to last longer: so no more Adds are expected than
	// came within the span. A longer burst raises the guess as it goes
	// on, each Add planning again with the ENIs under way counted.
	return min(int(math.Ceil(rate*d.Seconds())), k-1)
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
