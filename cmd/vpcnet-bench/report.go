package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is one scenario's figures, rendered as aligned text on the
// terminal and as a Markdown table in BENCHMARKS.md.
type Table struct {
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
	// Notes are printed under the table: settings, caveats.
	Notes []string `json:"notes,omitempty"`
}

// AddRow appends a row; cells beyond the header are an error in the
// caller, so they panic.
func (t *Table) AddRow(cells ...string) {
	if len(cells) != len(t.Header) {
		panic(fmt.Sprintf("table %q: row has %d cells, header %d", t.Title, len(cells), len(t.Header)))
	}
	t.Rows = append(t.Rows, cells)
}

// Text writes the table with columns padded to their widest cell.
func (t *Table) Text(w io.Writer) {
	width := make([]int, len(t.Header))
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(strings.ReplaceAll(c, "`", "")))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			c = strings.ReplaceAll(c, "`", "")
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	fmt.Fprintf(w, "== %s\n", t.Title)
	line(t.Header)
	for _, row := range t.Rows {
		line(row)
	}
	for _, n := range t.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintln(w)
}

// Markdown writes the table in GitHub's pipe syntax, its title in bold
// above and its notes as a list below.
func (t *Table) Markdown(w io.Writer) {
	fmt.Fprintf(w, "**%s**\n\n", t.Title)
	row := func(cells []string) {
		esc := make([]string, len(cells))
		for i, c := range cells {
			esc[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(esc, " | "))
	}
	row(t.Header)
	sep := make([]string, len(t.Header))
	for i := range sep {
		sep[i] = "---"
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(sep, "|"))
	for _, r := range t.Rows {
		row(r)
	}
	if len(t.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range t.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	fmt.Fprintln(w)
}

// Formatting of cells. Latencies are in milliseconds with three
// significant figures; "n/a" marks what could not be measured.

func fmtMS(v float64) string {
	switch {
	case v == 0:
		return "n/a"
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", v)
}

func fmtSec(v float64) string { return fmt.Sprintf("%.2f s", v) }

func fmtMiB(bytes float64) string { return fmt.Sprintf("%.1f MiB", bytes/(1<<20)) }

// fmtSpread renders min / median / max of a repeated figure.
func fmtSpread(d Dist, f func(float64) string) string {
	if d.N <= 1 {
		return f(d.P50)
	}
	return fmt.Sprintf("%s / %s / %s", f(d.Min), f(d.P50), f(d.Max))
}
