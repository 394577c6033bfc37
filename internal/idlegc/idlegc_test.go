package idlegc

import "testing"

func TestTrimsOnceAfterWorkWhenQuiet(t *testing.T) {
	tr := Trimmer{Quiet: 100, Worth: 1000}
	steps := []struct {
		total uint64
		want  bool
		why   string
	}{
		{5000, false, "the first sample only sets the baseline"},
		{5050, true, "quiet after start-up's 5000 bytes: trim"},
		{5060, false, "still quiet, but nothing worth it allocated since"},
		{9000, false, "busy"},
		{9500, false, "busy"},
		{9550, true, "quiet again after 4490 bytes"},
		{9560, false, "nothing new"},
		{9800, false, "200 bytes: not quiet"},
		{9850, false, "quiet, but only 300 bytes since the trim"},
	}
	for i, s := range steps {
		if got := tr.Sample(s.total); got != s.want {
			t.Fatalf("step %d (%s): trim %v, want %v", i, s.why, got, s.want)
		}
	}
}
