package main

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Paired samples: two arms of a comparison measured in pairs, a[i] and
// b[i] taken back to back with their order alternating, so that both see
// the machine's load of that moment. The ratio of their quantiles is
// what a goal judges; how far it could move on another run of the same
// tree, with the same load, is its bootstrap interval: the pairs
// resampled with replacement (a pair stays a pair, so load that slowed
// both arms slows both in every resample), the ratio computed again on
// each resample, and the middle 95% of those ratios kept.

// PairedRatio is quantile(a)/quantile(b) of paired samples with its 95%
// bootstrap interval.
type PairedRatio struct {
	Ratio float64 `json:"ratio"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}

// bootstrapResamples is how many resamples an interval is taken from.
const bootstrapResamples = 2000

// pairedRatio compares the q-quantiles of paired samples a and b (of one
// length). The resamples are drawn from a fixed seed, so one set of
// samples always gives one interval.
func pairedRatio(a, b []float64, q float64) PairedRatio {
	n := min(len(a), len(b))
	if n == 0 {
		return PairedRatio{}
	}
	a, b = a[:n], b[:n]
	sa, sb := slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	out := PairedRatio{Ratio: ratio(quantile(sa, q), quantile(sb, q))}
	// Each arm's indexes in the order of their values: a resample's
	// quantile is then a walk over counts, not a sort.
	oa, ob := sortedOrder(a), sortedOrder(b)
	rng := rand.New(rand.NewPCG(uint64(n), 0x9e3779b97f4a7c15))
	counts := make([]int, n)
	ratios := make([]float64, 0, bootstrapResamples)
	for range bootstrapResamples {
		clear(counts)
		for range n {
			counts[rng.IntN(n)]++
		}
		ratios = append(ratios, ratio(weightedQuantile(a, oa, counts, q), weightedQuantile(b, ob, counts, q)))
	}
	slices.Sort(ratios)
	out.Lo, out.Hi = quantile(ratios, 0.025), quantile(ratios, 0.975)
	return out
}

// sortedOrder is the indexes of xs in the order of their values.
func sortedOrder(xs []float64) []int {
	order := make([]int, len(xs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		switch {
		case xs[i] < xs[j]:
			return -1
		case xs[i] > xs[j]:
			return 1
		}
		return 0
	})
	return order
}

// weightedQuantile is quantile of the resample that holds xs[i]
// counts[i] times, order being xs's indexes sorted by value.
func weightedQuantile(xs []float64, order, counts []int, q float64) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	pos := q * float64(total-1)
	lo := int(math.Floor(pos))
	frac := pos - float64(lo)
	// The values at ranks lo and lo+1 of the resample.
	var at, next float64
	seen, found := 0, false
	for _, i := range order {
		c := counts[i]
		if c == 0 {
			continue
		}
		if !found && seen+c > lo {
			at, found = xs[i], true
			if seen+c > lo+1 {
				next = xs[i]
				break
			}
			seen += c
			continue
		}
		if found {
			next = xs[i]
			break
		}
		seen += c
	}
	if lo >= total-1 {
		return at
	}
	return at + frac*(next-at)
}
