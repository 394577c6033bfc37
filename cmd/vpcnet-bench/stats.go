package main

import (
	"math"
	"slices"
	"time"
)

// Dist summarises repeated measurements of one quantity.
type Dist struct {
	N   int     `json:"n"`
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Summarize returns the distribution of xs; xs is not changed.
func Summarize(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Dist{
		N: len(s), Min: s[0], Max: s[len(s)-1],
		P50: quantile(s, 0.50), P90: quantile(s, 0.90), P99: quantile(s, 0.99),
	}
}

// quantile of sorted s by linear interpolation between closest ranks
// (the definition numpy and R use by default), so p99 of 200 samples is
// not simply the second largest.
func quantile(s []float64, q float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	frac := pos - float64(lo)
	return s[lo] + frac*(s[lo+1]-s[lo])
}

// ms converts durations to milliseconds, the unit of every latency here.
func ms(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// ratio is a/b, or 0 when b is zero: a missing reference shows as
// "n/a" in tables (see fmtRatio) rather than as infinitely slow, and
// JSON cannot carry NaN.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
