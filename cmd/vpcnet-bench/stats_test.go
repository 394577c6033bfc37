package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSummarizeInterpolatesBetweenRanks(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1, unsorted on purpose
	}
	tests := []struct {
		name string
		in   []float64
		want Dist
	}{
		{"empty", nil, Dist{}},
		{"one sample is every quantile", []float64{7}, Dist{N: 1, Min: 7, P50: 7, P90: 7, P99: 7, Max: 7}},
		{"median of an even count is the midpoint", []float64{4, 1, 3, 2}, Dist{N: 4, Min: 1, P50: 2.5, P90: 3.7, P99: 3.97, Max: 4}},
		{"1 to 100", hundred, Dist{N: 100, Min: 1, P50: 50.5, P90: 90.1, P99: 99.01, Max: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(tt.in)
			if !near(got.P50, tt.want.P50) || !near(got.P90, tt.want.P90) || !near(got.P99, tt.want.P99) ||
				got.N != tt.want.N || got.Min != tt.want.Min || got.Max != tt.want.Max {
				t.Errorf("Summarize(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSummarizeLeavesItsInputAlone(t *testing.T) {
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("input reordered to %v", in)
	}
}

func TestRatioOfAMissingReferenceRendersAsNotAvailable(t *testing.T) {
	if got := fmtRatio(ratio(5, 0)); got != "n/a" {
		t.Errorf("ratio to zero renders as %q, want n/a", got)
	}
	if got := fmtRatio(ratio(13, 10)); got != "1.30×" {
		t.Errorf("13/10 renders as %q", got)
	}
}

func TestTablesRenderAlignedTextAndEscapedMarkdown(t *testing.T) {
	tab := Table{Title: "T", Header: []string{"name", "value"}, Notes: []string{"a note"}}
	tab.AddRow("`short`", "1")
	tab.AddRow("a|longer", "22")
	var text, md bytes.Buffer
	tab.Text(&text)
	tab.Markdown(&md)
	wantText := "== T\nname      value\nshort     1\na|longer  22\n  note: a note\n\n"
	if text.String() != wantText {
		t.Errorf("text:\n%s\nwant:\n%s", text.String(), wantText)
	}
	for _, want := range []string{"**T**", "| name | value |", "|---|---|", "| `short` | 1 |", `| a\|longer | 22 |`, "- a note"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

func TestAddRowWithTheWrongWidthPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a row wider than the header was accepted")
		}
	}()
	tab := Table{Header: []string{"one"}}
	tab.AddRow("a", "b")
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
