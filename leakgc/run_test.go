package leakgc

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// runDelays runs a collector until it has asked for n waits, firing each
// wait at once, and returns the waits it asked for and the scans it made.
func runDelays(t *testing.T, n int, edit func(*Options)) ([]time.Duration, int) {
	t.Helper()
	fc := newFakeCloud(eni("eni-1", cluster, "i-dead", ago(time.Hour)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var delays []time.Duration
	c, _ := newTestCollector(t, fc, func(o *Options) {
		o.Interval = 30 * time.Minute
		o.Clock = testClock{wait: func(d time.Duration) bool {
			delays = append(delays, d)
			if len(delays) == n {
				cancel()
				return false // never fires
			}
			return true
		}}
		if edit != nil {
			edit(o)
		}
	})
	c.Run(ctx)
	return delays, len(fc.filters)
}

func TestRunJitterIsDeterministicPerSeed(t *testing.T) {
	seeded := func(seed uint64) func(*Options) {
		return func(o *Options) {
			o.Jitter = 10 * time.Minute
			o.Rand = rand.New(rand.NewPCG(seed, 0))
		}
	}
	a, scans := runDelays(t, 20, seeded(7))
	b, _ := runDelays(t, 20, seeded(7))
	other, _ := runDelays(t, 20, seeded(8))
	if scans != 19 {
		t.Errorf("%d scans for 20 waits, want 19", scans)
	}
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 waited %v, then %v", a, b)
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 7 and 8 both waited %v", a)
	}
	if a[0] < 0 || a[0] >= 10*time.Minute {
		t.Errorf("first scan after %s, want within [0, 10m)", a[0])
	}
	for _, d := range a[1:] {
		if d < 25*time.Minute || d >= 35*time.Minute {
			t.Errorf("scan interval %s, want within [25m, 35m)", d)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(a[1:])))) < 2 {
		t.Errorf("every interval is %s: no jitter", a[1])
	}
}

func TestRunWithoutJitterScansAtTheInterval(t *testing.T) {
	delays, scans := runDelays(t, 4, func(o *Options) { o.Jitter = -1 })
	want := []time.Duration{0, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	if !slices.Equal(delays, want) || scans != 3 {
		t.Errorf("waited %v for %d scans, want %v for 3", delays, scans, want)
	}
}

func TestRunDefaultJitterIsHalfTheInterval(t *testing.T) {
	delays, _ := runDelays(t, 50, nil)
	for i, d := range delays {
		lo, hi := 30*time.Minute-15*time.Minute/2, 30*time.Minute+15*time.Minute/2
		if i == 0 {
			lo, hi = 0, 15*time.Minute
		}
		if d < lo || d >= hi {
			t.Errorf("wait %d is %s, want within [%s, %s)", i, d, lo, hi)
		}
	}
}

func TestRunKeepsScanningAfterAFailedScan(t *testing.T) {
	fc := newFakeCloud()
	fc.listErr = apiError("RequestLimitExceeded", "Request limit exceeded.")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &records{}
	var waits int
	c, reg := newTestCollector(t, fc, func(o *Options) {
		o.Logger = slog.New(logs)
		o.Clock = testClock{wait: func(time.Duration) bool {
			if waits++; waits == 4 {
				cancel()
				return false
			}
			return true
		}}
	})
	c.Run(ctx)
	if len(fc.filters) != 3 {
		t.Errorf("%d scans, want 3: a failed scan must not stop the loop", len(fc.filters))
	}
	if got := metric(t, reg, "vpcnet_leaked_eni_scan_errors_total", "op", "list"); got != 3 {
		t.Errorf("scan_errors_total{op=list} = %v, want 3", got)
	}
	failed := logs.matching("scan failed")
	if len(failed) != 3 || !strings.Contains(failed[0].attrs["error"], "RequestLimitExceeded") {
		t.Errorf("logged %+v, want 3 warnings carrying the error", failed)
	}
}

func TestRunReturnsWhenContextEnds(t *testing.T) {
	fc := newFakeCloud()
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := newTestCollector(t, fc, func(o *Options) {
		o.Clock = testClock{} // no wait ever fires
	})
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	cancel()
	<-done // the test's own timeout catches a Run that never returns
	if len(fc.filters) != 0 {
		t.Errorf("%d scans after cancel before the first wait ended, want 0", len(fc.filters))
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	ok := func() Options { return Options{Cloud: newFakeCloud(), ClusterName: cluster} }
	tests := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no cloud", func(o *Options) { o.Cloud = nil }, "set Options.Cloud"},
		{"no owner", func(o *Options) { o.ClusterName = "" }, "set Options.ClusterName"},
		{"grace too short", func(o *Options) { o.Grace = 30 * time.Second }, "grace 30s is shorter than 1m0s"},
		{"negative grace", func(o *Options) { o.Grace = -time.Minute }, "grace -1m0s"},
		{"negative interval", func(o *Options) { o.Interval = -time.Minute }, "negative interval"},
		{"jitter above interval", func(o *Options) { o.Interval = time.Minute; o.Jitter = 2 * time.Minute }, "jitter 2m0s exceeds the interval 1m0s"},
		{"negative max per scan", func(o *Options) { o.MaxPerScan = -1 }, "negative MaxPerScan"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok()
			tt.edit(&o)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error %v, want one containing %q", err, tt.want)
			}
		})
	}
	t.Run("instance id alone is enough", func(t *testing.T) {
		if _, err := New(Options{Cloud: newFakeCloud(), InstanceID: self}); err != nil {
			t.Errorf("New: %v", err)
		}
	})
	t.Run("metrics registered twice", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		o := ok()
		o.Registerer = reg
		if _, err := New(o); err != nil {
			t.Fatal(err)
		}
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), "register metrics") {
			t.Errorf("second New error %v, want a registration error", err)
		}
	})
}
