package leakgc

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vpcnet/vpcnet/cloud"
)

var now = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

const (
	cluster = "prod"
	self    = "i-self"
)

// trace records the collector's calls in order, across fakes.
type trace struct {
	mu     sync.Mutex
	events []string
}

func (t *trace) add(e string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, e)
}

func (t *trace) list() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.events)
}

// fakeCloud is an EC2 holding enis. It applies ENIFilter as EC2 does,
// unless ignoreFilter makes it return every ENI, as a broken filter would.
type fakeCloud struct {
	trace        *trace
	ignoreFilter bool
	listErr      error
	// onDelete, if set, decides a delete's error; nil deletes the ENI.
	onDelete func(ctx context.Context, id string) error

	// mu guards enis and filters.
	mu      sync.Mutex
	enis    map[string]cloud.ENI
	filters []cloud.ENIFilter
}

var _ Cloud = (*fakeCloud)(nil)

func newFakeCloud(enis ...cloud.ENI) *fakeCloud {
	f := &fakeCloud{trace: &trace{}, enis: map[string]cloud.ENI{}}
	for _, e := range enis {
		f.enis[e.ID] = e
	}
	return f
}

func (f *fakeCloud) ListENIs(_ context.Context, flt cloud.ENIFilter) ([]cloud.ENI, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filters = append(f.filters, flt)
	f.trace.add("list")
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []cloud.ENI
	for _, id := range slices.Sorted(maps.Keys(f.enis)) {
		if e := f.enis[id]; f.ignoreFilter || matches(flt, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

func matches(f cloud.ENIFilter, e cloud.ENI) bool {
	if f.Status != "" && e.Status != f.Status || f.SubnetID != "" && e.SubnetID != f.SubnetID {
		return false
	}
	if f.InstanceID != "" && (e.Attachment == nil || e.Attachment.InstanceID != f.InstanceID) {
		return false
	}
	for k, v := range f.Tags {
		got, ok := e.Tags[k]
		if !ok || v != "" && got != v {
			return false
		}
	}
	return true
}

func (f *fakeCloud) DeleteENI(ctx context.Context, id string) error {
	f.trace.add("delete " + id)
	if f.onDelete != nil {
		if err := f.onDelete(ctx, id); err != nil {
			return fmt.Errorf("delete %s: %w", id, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.enis[id]; !ok {
		return fmt.Errorf("delete %s: %w", id, apiError("InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '"+id+"' does not exist"))
	}
	delete(f.enis, id)
	return nil
}

func (f *fakeCloud) remaining() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.enis))
}

func apiError(code, msg string) error {
	return &smithy.GenericAPIError{Code: code, Message: msg}
}

// countingLimiter lets every call through, recording it in the trace.
type countingLimiter struct{ trace *trace }

func (l countingLimiter) Wait(ctx context.Context) error {
	l.trace.add("wait")
	return ctx.Err()
}

// eni is an available ENI in subnet-a with the given owner tags; empty
// values leave the tag out.
func eni(id, clusterName, createdBy, createdAt string) cloud.ENI {
	tags := map[string]string{}
	for k, v := range map[string]string{cloud.TagClusterName: clusterName, cloud.TagInstanceID: createdBy, cloud.TagCreatedAt: createdAt} {
		if v != "" {
			tags[k] = v
		}
	}
	return cloud.ENI{
		ID: id, Status: cloud.StatusAvailable, SubnetID: "subnet-a",
		PrimaryIP:    netip.MustParseAddr("10.0.0.10"),
		SecondaryIPs: []netip.Addr{netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("10.0.0.12")},
		Tags:         tags,
	}
}

// ago is the created-at tag of an ENI created d before now.
func ago(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }

// newTestCollector builds a collector over fc with a fixed clock, a seeded
// rand, a counting limiter and a fresh registry; edit adjusts the options.
func newTestCollector(t *testing.T, fc *fakeCloud, edit func(*Options)) (*Collector, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := Options{
		Cloud:         fc,
		ClusterName:   cluster,
		InstanceID:    self,
		DeleteLimiter: countingLimiter{fc.trace},
		Clock:         testClock{},
		Logger:        slog.New(slog.DiscardHandler),
		Registerer:    reg,
	}
	if edit != nil {
		edit(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, reg
}

// metric is the value of the series of name whose labels include labels
// ("k", "v" pairs); it fails the test when there is none.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(lp *dto.LabelPair) bool {
					return lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
				}) {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// records captures log records for assertions on what an operator reads.
type records struct {
	mu   sync.Mutex
	recs []record
}

type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	attrs := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, record{level: rec.Level, msg: rec.Message, attrs: attrs})
	return nil
}

// matching are the records whose message contains substr.
func (r *records) matching(substr string) []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []record
	for _, rec := range r.recs {
		if strings.Contains(rec.msg, substr) {
			out = append(out, rec)
		}
	}
	return out
}

// testClock reads the tests' fixed now and hands each wait to wait, which
// says whether it fires at once; nil wait never fires.
type testClock struct{ wait func(d time.Duration) bool }

func (testClock) Now() time.Time { return now }

func (c testClock) AfterFunc(d time.Duration, f func()) func() bool {
	if c.wait != nil && c.wait(d) {
		f()
	}
	return func() bool { return false }
}
