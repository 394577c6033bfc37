package leakgc

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A created-at tag far in the future used to count as young at every
// scan, forever and silently: the leak kept its addresses and nobody was
// told. Within a day it is clock skew and stays young; beyond, it is a
// corrupt tag, of unknown age, reported like a missing one.
func TestACreatedAtMoreThanADayAheadIsReportedNotKeptYoungForever(t *testing.T) {
	for _, tt := range []struct {
		name, tag string
		want      Result
	}{
		{"an hour ahead is clock skew", ago(-time.Hour), Result{Seen: 1, SkippedYoung: 1}},
		{"a day and a second ahead is corrupt", ago(-maxClockSkew - time.Second), Result{Seen: 1, SkippedUntagged: 1}},
		{"year 9999", "9999-12-31T23:59:59Z", Result{Seen: 1, SkippedUntagged: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeCloud(eni("eni-1", cluster, "i-dead", tt.tag))
			c, _ := newTestCollector(t, fc, nil)
			res, err := c.Scan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res != tt.want {
				t.Errorf("Scan = %+v, want %+v", res, tt.want)
			}
			if len(fc.remaining()) != 1 {
				t.Error("the ENI was deleted")
			}
		})
	}
}

// The tag's value reaches the log in the error; EC2 bounds tag values at
// 256 characters, but the collector must not rely on it.
func TestCreatedAtErrorQuotesABoundedPartOfTheTag(t *testing.T) {
	_, err := createdAt(eni("eni-1", cluster, "i-dead", strings.Repeat("x", 100_000)), now)
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "(100000 bytes)") {
		t.Errorf("createdAt error = %.400v (%d bytes), want a short one giving the length", err, len(err.Error()))
	}
}

// FuzzCreatedAt feeds created-at tags to the collector's decision: it
// never panics, and an ENI is deleted only when its tag reads as a time
// more than the grace period ago.
func FuzzCreatedAt(f *testing.F) {
	for _, s := range []string{ago(time.Hour), ago(DefaultGrace), ago(-time.Hour), "9999-12-31T23:59:59Z",
		"0000-01-01T00:00:00Z", "2026-01-02T03:04:05.999999999+14:00", "yesterday", "", "2026-08-01 10:00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		fc := newFakeCloud(eni("eni-1", cluster, "i-dead", tag))
		c, _ := newTestCollector(t, fc, nil)
		res, err := c.Scan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Seen != 1 || res.Deleted+res.SkippedYoung+res.SkippedUntagged != 1 {
			t.Fatalf("Scan = %+v: the ENI is not counted once", res)
		}
		created, perr := createdAt(eni("eni-1", cluster, "i-dead", tag), now)
		if res.Deleted == 1 && (perr != nil || now.Sub(created) <= DefaultGrace) {
			t.Errorf("deleted an ENI tagged %q (created %v, %v)", tag, created, perr)
		}
		// %q writes a byte that is not UTF-8 as four: 64 bytes quote to
		// at most 256.
		if perr != nil && len(perr.Error()) > 4*64+200 {
			t.Errorf("error of %d bytes", len(perr.Error()))
		}
	})
}
