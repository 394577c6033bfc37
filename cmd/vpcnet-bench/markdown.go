package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
)

// BENCHMARKS.md mixes prose written by people with sections this driver
// writes. A generated section sits between two HTML comments,
//
//	<!-- begin vpcnet-bench:NAME -->
//	...
//	<!-- end vpcnet-bench:NAME -->
//
// where NAME is a scenario, "run" (command, machine, date) or "goals".
// Everything outside them is left as it is.

func beginMarker(name string) string { return "<!-- begin vpcnet-bench:" + name + " -->" }
func endMarker(name string) string   { return "<!-- end vpcnet-bench:" + name + " -->" }

// rewriteMarkdown replaces the generated sections of the file at path
// with the record's figures.
func rewriteMarkdown(path string, rec *Record) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := renderSections(doc, rec)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}

// renderSections returns doc with a section per result of rec, and the
// run and goals sections when rec covers every scenario (a partial run
// leaves them describing the last full one).
func renderSections(doc []byte, rec *Record) ([]byte, error) {
	sections := map[string]string{}
	for _, r := range rec.Results {
		sections[r.Scenario] = scenarioSection(r, rec)
	}
	if coversDefault(rec) {
		sections["run"] = runSection(rec)
		sections["goals"] = goalsSection(rec)
	}
	var missing []string
	for _, name := range sortedKeys(sections) {
		var ok bool
		if doc, ok = replaceSection(doc, name, sections[name]); !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no generated section for %s: add the lines %q and %q where its figures go",
			strings.Join(missing, ", "), beginMarker(missing[0]), endMarker(missing[0]))
	}
	return doc, nil
}

// coversDefault says whether rec has every scenario a plain run plays.
func coversDefault(rec *Record) bool {
	for _, s := range defaultScenarios() {
		if !slices.ContainsFunc(rec.Results, func(r *Result) bool { return r.Scenario == s.name }) {
			return false
		}
	}
	return true
}

// replaceSection swaps the body between name's markers; ok is false when
// they are not both there in order.
func replaceSection(doc []byte, name, body string) ([]byte, bool) {
	begin, end := []byte(beginMarker(name)), []byte(endMarker(name))
	i := bytes.Index(doc, begin)
	if i < 0 {
		return doc, false
	}
	j := bytes.Index(doc[i:], end)
	if j < 0 {
		return doc, false
	}
	j += i
	var out bytes.Buffer
	out.Write(doc[:i+len(begin)])
	out.WriteString("\n")
	out.WriteString(body)
	out.Write(doc[j:])
	return out.Bytes(), true
}

func runSection(rec *Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s` (all scenarios, %.0f s).\n\n", rec.Command, rec.Seconds)
	fmt.Fprintf(&b, "Machine: %s. Date: %s.\n", rec.Machine, rec.Started.Format("2006-01-02"))
	return b.String()
}

func goalsSection(rec *Record) string {
	t := Table{Title: "Goals of the benchmark issue", Header: []string{"goal", "measured", "verdict"}}
	for _, g := range rec.Goals {
		verdict := "met"
		if !g.Met {
			verdict = "**missed**"
		}
		t.AddRow(g.Goal, g.Measured, verdict)
	}
	var b strings.Builder
	t.Markdown(&b)
	return b.String()
}

func scenarioSection(r *Result, rec *Record) string {
	var b strings.Builder
	took := fmt.Sprintf("%.0f s", r.Seconds)
	if r.Seconds < 1 {
		took = "under a second"
	}
	fmt.Fprintf(&b, "_Measured %s by `%s` on %s; the scenario took %s._\n\n",
		rec.Started.Format("2006-01-02"), rec.Command, rec.Machine, took)
	if r.Err != "" {
		fmt.Fprintf(&b, "**This scenario failed in that run:** %s\n\n", oneLine(r.Err))
	}
	for i := range r.Tables {
		r.Tables[i].Markdown(&b)
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
