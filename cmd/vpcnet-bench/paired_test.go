package main

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The weighted walk against a deliberately simple reference: the
// resample written out and sorted.
func TestWeightedQuantileIsTheQuantileOfTheResampleWrittenOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + rng.IntN(40)
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(rng.IntN(10)) // ties on purpose
		}
		counts := make([]int, n)
		var full []float64
		for range n {
			i := rng.IntN(n)
			counts[i]++
			full = append(full, xs[i])
		}
		slices.Sort(full)
		order := sortedOrder(xs)
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
			if got, want := weightedQuantile(xs, order, counts, q), quantile(full, q); !near(got, want) {
				t.Fatalf("xs %v counts %v q %v: %v, want %v", xs, counts, q, got, want)
			}
		}
	}
}

func TestPairedRatioIntervals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	// Pairs that share the machine's load: a spike slows both arms.
	load := func(n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = 1 + rng.Float64()*0.1
			if rng.IntN(50) == 0 {
				out[i] += 5 * rng.Float64()
			}
		}
		return out
	}
	base := load(5000)
	scaled := func(k float64) []float64 {
		out := make([]float64, len(base))
		for i, v := range base {
			out[i] = k * v
		}
		return out
	}
	if r := pairedRatio(base, base, 0.99); r.Ratio != 1 || r.Lo != 1 || r.Hi != 1 {
		t.Errorf("one arm against itself: %+v, want exactly 1", r)
	}
	if r := pairedRatio(scaled(1.2), base, 0.99); !near(r.Lo, 1.2) || !near(r.Hi, 1.2) {
		t.Errorf("an arm 1.2× the other in every pair: %+v", r)
	}
	// Two arms with independent noise: the interval holds the ratio and
	// the truth (1), and is not a point.
	other := load(5000)
	r := pairedRatio(other, base, 0.99)
	if !(r.Lo <= r.Ratio && r.Ratio <= r.Hi) || r.Lo > 1 || r.Hi < 1 || r.Hi-r.Lo < 0.01 {
		t.Errorf("independent noise: %+v", r)
	}
	if again := pairedRatio(other, base, 0.99); again != r {
		t.Errorf("the same samples gave %+v, then %+v", r, again)
	}
	if r := pairedRatio(nil, nil, 0.99); r != (PairedRatio{}) {
		t.Errorf("no samples: %+v", r)
	}
}
