package leakgc

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/vpcnet/vpcnet/cloud"
)

func TestScanDecidesEachENI(t *testing.T) {
	inUse := eni("eni-1", cluster, "i-dead", ago(time.Hour))
	inUse.Status = cloud.StatusInUse
	inUse.Attachment = &cloud.Attachment{ID: "eni-attach-1", InstanceID: "i-live", State: cloud.AttachmentAttached}
	attaching := eni("eni-1", cluster, "i-dead", ago(time.Hour))
	attaching.Attachment = &cloud.Attachment{ID: "eni-attach-1", InstanceID: "i-live", State: cloud.AttachmentAttaching}

	tests := []struct {
		name    string
		cluster string // the collector's ClusterName; InstanceID is self
		eni     cloud.ENI
		want    string // deleted, young, untagged or refused
	}{
		{"dead node's ENI just past grace is deleted", cluster, eni("eni-1", cluster, "i-dead", ago(DefaultGrace+time.Second)), "deleted"},
		{"ENI exactly at grace is kept", cluster, eni("eni-1", cluster, "i-dead", ago(DefaultGrace)), "young"},
		{"ENI inside grace is kept", cluster, eni("eni-1", cluster, "i-dead", ago(DefaultGrace-time.Second)), "young"},
		{"ENI created in the future (clock skew) is kept", cluster, eni("eni-1", cluster, "i-dead", ago(-time.Hour)), "young"},
		{"own ENI past grace is deleted", cluster, eni("eni-1", cluster, self, ago(time.Hour)), "deleted"},
		{"other cluster's ENI is never deleted", cluster, eni("eni-1", "staging", "i-dead", ago(time.Hour)), "refused"},
		{"ENI without a cluster tag is not the cluster's", cluster, eni("eni-1", "", "i-dead", ago(time.Hour)), "refused"},
		{"in-use ENI is never deleted", cluster, inUse, "refused"},
		{"available ENI with an attachment is never deleted", cluster, attaching, "refused"},
		{"ENI without created-at is left alone", cluster, eni("eni-1", cluster, "i-dead", ""), "untagged"},
		{"ENI with unreadable created-at is left alone", cluster, eni("eni-1", cluster, "i-dead", "yesterday"), "untagged"},
		{"ENI with created-at not in RFC3339 is left alone", cluster, eni("eni-1", cluster, "i-dead", "2026-08-01 10:00:00"), "untagged"},
		{"without cluster name own ENI past grace is deleted", "", eni("eni-1", cluster, self, ago(time.Hour)), "deleted"},
		{"without cluster name own untagged-cluster ENI is deleted", "", eni("eni-1", "", self, ago(time.Hour)), "deleted"},
		{"without cluster name another node's ENI is left alone", "", eni("eni-1", cluster, "i-dead", ago(time.Hour)), "refused"},
		{"without cluster name own young ENI is kept", "", eni("eni-1", cluster, self, ago(time.Minute)), "young"},
	}
	for _, tt := range tests {
		// The outcome must not depend on EC2 applying the filter: the
		// collector checks each ENI itself.
		for _, ignoreFilter := range []bool{false, true} {
			name := tt.name
			if ignoreFilter {
				name += " even if EC2 ignores the filter"
			}
			t.Run(name, func(t *testing.T) {
				fc := newFakeCloud(tt.eni)
				fc.ignoreFilter = ignoreFilter
				c, _ := newTestCollector(t, fc, func(o *Options) { o.ClusterName = tt.cluster })
				res, err := c.Scan(context.Background())
				if err != nil {
					t.Fatalf("Scan: %v", err)
				}
				gone := len(fc.remaining()) == 0
				if gone != (tt.want == "deleted") {
					t.Errorf("ENI deleted: %t, want %s", gone, tt.want)
				}
				var want Result
				switch tt.want {
				case "deleted":
					want = Result{Seen: 1, Deleted: 1}
				case "young":
					want = Result{Seen: 1, SkippedYoung: 1}
				case "untagged":
					want = Result{Seen: 1, SkippedUntagged: 1}
				case "refused":
					// Refused when listed at all; a working filter may
					// keep it out of the listing.
					want = Result{Refused: res.Refused}
					if ignoreFilter && res.Refused != 1 {
						t.Errorf("Refused = %d, want 1", res.Refused)
					}
				}
				if res != want {
					t.Errorf("Scan = %+v, want %+v", res, want)
				}
			})
		}
	}
}

func TestScanAsksEC2ForAvailableENIsOfOurTag(t *testing.T) {
	tests := []struct {
		name    string
		cluster string
		want    map[string]string
	}{
		{"with cluster name: the cluster's", cluster, map[string]string{cloud.TagClusterName: cluster}},
		{"without: this instance's", "", map[string]string{cloud.TagInstanceID: self}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeCloud()
			c, _ := newTestCollector(t, fc, func(o *Options) { o.ClusterName = tt.cluster })
			if _, err := c.Scan(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(fc.filters) != 1 {
				t.Fatalf("listed %d times, want once", len(fc.filters))
			}
			f := fc.filters[0]
			if f.Status != cloud.StatusAvailable || f.InstanceID != "" || f.SubnetID != "" || len(f.Tags) != len(tt.want) {
				t.Fatalf("filter %+v", f)
			}
			for k, v := range tt.want {
				if f.Tags[k] != v {
					t.Errorf("filter tag %s = %q, want %q", k, f.Tags[k], v)
				}
			}
		})
	}
}

func TestScanDeleteOutcomes(t *testing.T) {
	tests := []struct {
		name      string
		deleteErr error
		want      Result
		wantErr   string // substring; "" means no error
	}{
		{"deleted", nil, Result{Seen: 1, Deleted: 1}, ""},
		{"deleted by someone else first is fine",
			apiError("InvalidNetworkInterfaceID.NotFound", "The networkInterface ID 'eni-1' does not exist"),
			Result{Seen: 1, Gone: 1}, ""},
		{"attached in between is skipped, not forced",
			apiError("InvalidParameterValue", "Network interface 'eni-1' is currently in use."),
			Result{Seen: 1, SkippedInUse: 1}, ""},
		{"in use as InvalidNetworkInterface.InUse is skipped",
			apiError("InvalidNetworkInterface.InUse", "Interface: [eni-1] in use."),
			Result{Seen: 1, SkippedInUse: 1}, ""},
		{"other invalid parameter is an error",
			apiError("InvalidParameterValue", "Value for parameter networkInterfaceId is invalid."),
			Result{Seen: 1, Errors: 1}, "eni-1"},
		{"denied is an error naming the ENI",
			apiError("UnauthorizedOperation", "You are not authorized to perform this operation."),
			Result{Seen: 1, Errors: 1}, "leaked ENI eni-1 in subnet-a: delete eni-1: api error UnauthorizedOperation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeCloud(eni("eni-1", cluster, "i-dead", ago(time.Hour)))
			fc.onDelete = func(context.Context, string) error { return tt.deleteErr }
			var collected []string
			c, reg := newTestCollector(t, fc, func(o *Options) {
				o.OnCollected = func(e cloud.ENI) { collected = append(collected, e.ID) }
			})
			res, err := c.Scan(context.Background())
			if res != tt.want {
				t.Errorf("Scan = %+v, want %+v", res, tt.want)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Scan error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Scan error %v, want one containing %q", err, tt.wantErr)
			}
			if got, want := len(collected), tt.want.Deleted; got != want {
				t.Errorf("OnCollected called %d times, want %d", got, want)
			}
			if got := metric(t, reg, "vpcnet_leaked_enis_collected_total"); got != float64(tt.want.Deleted) {
				t.Errorf("collected_total = %v, want %d", got, tt.want.Deleted)
			}
			if got := metric(t, reg, "vpcnet_leaked_eni_scan_errors_total", "op", "delete"); got != float64(tt.want.Errors) {
				t.Errorf("scan_errors_total{op=delete} = %v, want %d", got, tt.want.Errors)
			}
		})
	}
}

func TestScanListFailureIsReturnedAndCounted(t *testing.T) {
	fc := newFakeCloud(eni("eni-1", cluster, "i-dead", ago(time.Hour)))
	fc.listErr = apiError("RequestLimitExceeded", "Request limit exceeded.")
	c, reg := newTestCollector(t, fc, nil)
	res, err := c.Scan(context.Background())
	if err == nil || !strings.Contains(err.Error(), "RequestLimitExceeded") {
		t.Errorf("Scan error %v, want the list error", err)
	}
	if res != (Result{}) || len(fc.remaining()) != 1 {
		t.Errorf("Scan = %+v and left %v, want nothing done", res, fc.remaining())
	}
	if got := metric(t, reg, "vpcnet_leaked_eni_scan_errors_total", "op", "list"); got != 1 {
		t.Errorf("scan_errors_total{op=list} = %v, want 1", got)
	}
	if got := metric(t, reg, "vpcnet_leaked_eni_last_scan_timestamp_seconds"); got != 0 {
		t.Errorf("last scan timestamp %v after a failed listing, want unset", got)
	}
}

func TestScanMetricsDescribeTheLastScan(t *testing.T) {
	fc := newFakeCloud(
		eni("eni-1", cluster, "i-dead", ago(time.Hour)),
		eni("eni-2", cluster, "i-dead", ago(2*time.Hour)),
		eni("eni-3", cluster, "i-dead", ago(time.Minute)),
	)
	c, reg := newTestCollector(t, fc, nil)
	for scan, want := range []struct{ collected, seen float64 }{{2, 3}, {2, 1}} {
		if _, err := c.Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := metric(t, reg, "vpcnet_leaked_enis_collected_total"); got != want.collected {
			t.Errorf("scan %d: collected_total = %v, want %v", scan, got, want.collected)
		}
		if got := metric(t, reg, "vpcnet_leaked_enis_seen"); got != want.seen {
			t.Errorf("scan %d: seen = %v, want %v", scan, got, want.seen)
		}
		if got := metric(t, reg, "vpcnet_leaked_eni_last_scan_timestamp_seconds"); got != float64(now.Unix()) {
			t.Errorf("scan %d: last scan timestamp = %v, want %d", scan, got, now.Unix())
		}
	}
}

func TestScanDeletesAtMostMaxPerScanAndDrainsOverScans(t *testing.T) {
	var enis []cloud.ENI
	for _, id := range []string{"eni-1", "eni-2", "eni-3", "eni-4", "eni-5"} {
		enis = append(enis, eni(id, cluster, "i-dead", ago(time.Hour)))
	}
	fc := newFakeCloud(enis...)
	c, _ := newTestCollector(t, fc, func(o *Options) { o.MaxPerScan = 2 })
	for _, want := range []Result{
		{Seen: 5, Deleted: 2, Deferred: 3},
		{Seen: 3, Deleted: 2, Deferred: 1},
		{Seen: 1, Deleted: 1},
		{},
	} {
		res, err := c.Scan(context.Background())
		if err != nil || res != want {
			t.Fatalf("Scan = %+v, %v; want %+v", res, err, want)
		}
	}
}

func TestScanWaitsForTheLimiterBeforeEachDelete(t *testing.T) {
	fc := newFakeCloud(
		eni("eni-1", cluster, "i-dead", ago(time.Hour)),
		eni("eni-2", cluster, "i-dead", ago(time.Hour)),
		eni("eni-3", cluster, "i-dead", ago(time.Minute)),
		eni("eni-4", cluster, "i-dead", ago(time.Hour)),
	)
	c, _ := newTestCollector(t, fc, nil)
	if _, err := c.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	events := fc.trace.list()
	var deletes int
	for i, e := range events {
		if strings.HasPrefix(e, "delete ") {
			deletes++
			if i == 0 || events[i-1] != "wait" {
				t.Errorf("%s without waiting for the limiter first: %v", e, events)
			}
		}
	}
	if deletes != 3 || slices.Contains(events, "delete eni-3") {
		t.Errorf("calls %v, want the three old ENIs deleted", events)
	}
}

func TestScanStopsAtTheRateLimit(t *testing.T) {
	fc := newFakeCloud(
		eni("eni-1", cluster, "i-dead", ago(time.Hour)),
		eni("eni-2", cluster, "i-dead", ago(time.Hour)),
		eni("eni-3", cluster, "i-dead", ago(time.Hour)),
	)
	// One token now, the next in an hour: a real limiter, with a deadline
	// it cannot meet, so the test waits for nothing.
	c, _ := newTestCollector(t, fc, func(o *Options) { o.DeleteLimiter = rate.NewLimiter(rate.Every(time.Hour), 1) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Scan(ctx)
	if want := (Result{Seen: 3, Deleted: 1, Deferred: 2}); res != want {
		t.Errorf("Scan = %+v, want %+v", res, want)
	}
	if err == nil || !strings.Contains(err.Error(), "2 leaked ENIs left") {
		t.Errorf("Scan error %v, want one saying the scan stopped with 2 left", err)
	}
	if len(fc.remaining()) != 2 {
		t.Errorf("left %v, want 2 ENIs", fc.remaining())
	}
}

func TestScanStopsWhenContextEnds(t *testing.T) {
	fc := newFakeCloud(
		eni("eni-1", cluster, "i-dead", ago(time.Hour)),
		eni("eni-2", cluster, "i-dead", ago(time.Hour)),
		eni("eni-3", cluster, "i-dead", ago(time.Hour)),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deletes int
	fc.onDelete = func(ctx context.Context, _ string) error {
		if deletes++; deletes == 2 {
			cancel()
			return ctx.Err()
		}
		return nil
	}
	c, _ := newTestCollector(t, fc, nil)
	res, err := c.Scan(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Scan error %v, want context.Canceled", err)
	}
	if want := (Result{Seen: 3, Deleted: 1, Deferred: 2}); res != want {
		t.Errorf("Scan = %+v, want %+v", res, want)
	}
	if deletes != 2 {
		t.Errorf("%d deletes tried, want none after the cancel", deletes)
	}
}

func TestScanReportsUnknownAgeOncePerENI(t *testing.T) {
	fc := newFakeCloud(
		eni("eni-1", cluster, "i-dead", ""),
		eni("eni-2", cluster, "i-dead", "not-a-time"),
	)
	logs := &records{}
	c, _ := newTestCollector(t, fc, func(o *Options) { o.Logger = slog.New(logs) })
	for range 3 {
		res, err := c.Scan(context.Background())
		if err != nil || res != (Result{Seen: 2, SkippedUntagged: 2}) {
			t.Fatalf("Scan = %+v, %v", res, err)
		}
	}
	var reported []string
	for _, r := range logs.matching("unknown age") {
		if r.level != slog.LevelWarn || !strings.Contains(r.attrs["fix"], cloud.TagCreatedAt) {
			t.Errorf("report %+v: want a warning naming the tag to fix", r)
		}
		reported = append(reported, r.attrs["eni"])
	}
	slices.Sort(reported)
	if !slices.Equal(reported, []string{"eni-1", "eni-2"}) {
		t.Errorf("reported %v over 3 scans, want each ENI once", reported)
	}
}

func TestScanLogsEachDelete(t *testing.T) {
	fc := newFakeCloud(
		eni("eni-1", cluster, "i-dead", ago(time.Hour)),
		eni("eni-2", cluster, self, ago(90*time.Minute)),
	)
	logs := &records{}
	c, _ := newTestCollector(t, fc, func(o *Options) { o.Logger = slog.New(logs) })
	if _, err := c.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]record{
		"eni-1": {attrs: map[string]string{"age": "1h0m0s", "created_by": "i-dead", "subnet": "subnet-a", "addresses": "3"}},
		"eni-2": {attrs: map[string]string{"age": "1h30m0s", "created_by": self, "subnet": "subnet-a", "addresses": "3"}},
	}
	reasons := map[string]string{"eni-1": "another instance of cluster prod", "eni-2": "created by this instance"}
	got := logs.matching("deleted leaked ENI")
	if len(got) != 2 {
		t.Fatalf("%d delete lines, want 2", len(got))
	}
	for _, r := range got {
		id := r.attrs["eni"]
		if r.level != slog.LevelInfo {
			t.Errorf("%s logged at %v, want info", id, r.level)
		}
		for k, v := range want[id].attrs {
			if r.attrs[k] != v {
				t.Errorf("%s: %s = %q, want %q", id, k, r.attrs[k], v)
			}
		}
		if !strings.Contains(r.attrs["reason"], reasons[id]) {
			t.Errorf("%s: reason %q, want it to say %q", id, r.attrs["reason"], reasons[id])
		}
	}
}

func TestScanShufflesDeletesBySeed(t *testing.T) {
	order := func(seed uint64) []string {
		var enis []cloud.ENI
		for _, id := range []string{"eni-1", "eni-2", "eni-3", "eni-4", "eni-5", "eni-6"} {
			enis = append(enis, eni(id, cluster, "i-dead", ago(time.Hour)))
		}
		fc := newFakeCloud(enis...)
		c, _ := newTestCollector(t, fc, func(o *Options) { o.Rand = rand.New(rand.NewPCG(seed, 0)) })
		if _, err := c.Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		var deleted []string
		for _, e := range fc.trace.list() {
			if id, ok := strings.CutPrefix(e, "delete "); ok {
				deleted = append(deleted, id)
			}
		}
		return deleted
	}
	a, b, other := order(1), order(1), order(2)
	if !slices.Equal(a, b) {
		t.Errorf("seed 1 deleted in order %v, then %v", a, b)
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 1 and 2 both deleted in order %v; nodes would race for the same ENIs", a)
	}
	if len(a) != 6 {
		t.Errorf("deleted %v, want all 6", a)
	}
}
