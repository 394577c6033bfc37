package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Severity says how bad a finding is: an error fails `vpcnetctl doctor`
// (exit 1), a warning or info does not.
type Severity string

const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

func (s Severity) rank() int {
	switch s {
	case Error:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// Finding is one thing wrong with the node. ID is stable: scripts and the
// README's troubleshooting table key on it.
type Finding struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	// What is wrong, in one sentence.
	What string `json:"what"`
	// Evidence is what doctor saw that says so, one fact a line.
	Evidence []string `json:"evidence"`
	// Fix is what the operator does about it.
	Fix string `json:"fix"`
}

// Source is one place doctor read, and whether it could.
type Source struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Detail says what was read, or why it could not be.
	Detail string `json:"detail"`
}

// Report is doctor's answer: what it could read and what it found.
type Report struct {
	Sources  []Source  `json:"sources"`
	Findings []Finding `json:"findings"`
}

// HasError says whether any finding is an error.
func (r Report) HasError() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Severity == Error })
}

// sortFindings puts errors first, then by id, so output is stable.
func sortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if d := a.Severity.rank() - b.Severity.rank(); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// WriteJSON writes the report as one JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteText writes the report for a person: the sources as a table, then
// each finding as a block.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tREAD\tDETAIL")
	for _, s := range r.Sources {
		ok := "yes"
		if !s.OK {
			ok = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, ok, s.Detail)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	fmt.Fprintln(w)
	if len(r.Findings) == 0 {
		_, err := fmt.Fprintln(w, "no finding: vpcnet looks healthy on this node from every source doctor could read")
		return err
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "%s [%s] %s\n", strings.ToUpper(string(f.Severity)), f.ID, f.What)
		for _, e := range f.Evidence {
			fmt.Fprintf(w, "    evidence: %s\n", e)
		}
		if _, err := fmt.Fprintf(w, "    fix: %s\n\n", f.Fix); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	return nil
}
