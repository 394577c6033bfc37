// Package conformance runs Kubernetes' own e2e tests (the sig-network
// conformance tests and the pod network's other tests) against vpcnet on
// the local cloud's real kubelets, and turns the JUnit file the suite
// writes into CONFORMANCE.md: each selected test with passed, failed or
// skipped and why.
package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Status is a test's outcome as the report shows it.
type Status string

const (
	Passed  Status = "passed"
	Failed  Status = "failed"
	Skipped Status = "skipped"
)

// Result is one test of a run.
type Result struct {
	Name     string // the spec's full text, as --ginkgo.focus matches it
	Status   Status
	Duration time.Duration
	// Reason says why a test was skipped (the selection's reason, or the
	// suite's own skip message) or how it failed (the failure's first
	// lines).
	Reason string
	// BySelection marks a test skipped by the selection (a reason about
	// the local cloud); a test the suite itself skipped lacks it.
	BySelection bool
	// SuiteNode marks the suite's own set-up or tear-down (kept only when
	// it failed).
	SuiteNode bool
}

// junitSuites is the part of Ginkgo's JUnit report read here.
type junitSuites struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"error"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
}

// leafPrefix is the node type Ginkgo puts before a spec's text ("[It] ").
var leafPrefix = regexp.MustCompile(`^\[(It|BeforeSuite|AfterSuite|SynchronizedBeforeSuite|SynchronizedAfterSuite|DeferCleanup \(Suite\)|ReportAfterSuite|ReportBeforeSuite)\]( |$)`)

// ParseJUnit reads the suite's JUnit report. Suite-level nodes (set-up,
// tear-down) are kept only when they failed: a failed set-up fails every
// test after it and must show.
func ParseJUnit(r io.Reader) ([]Result, error) {
	var s junitSuites
	if err := xml.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("read the e2e suite's JUnit report: %w", err)
	}
	var out []Result
	for _, suite := range s.Suites {
		for _, c := range suite.Cases {
			m := leafPrefix.FindStringSubmatch(c.Name)
			name := c.Name
			leaf := "It"
			if m != nil {
				name, leaf = strings.TrimPrefix(c.Name, m[0]), m[1]
			}
			res := Result{Name: name, Duration: time.Duration(c.Time * float64(time.Second))}
			switch {
			case c.Failure != nil:
				res.Status, res.Reason = Failed, firstLines(c.Failure.Message+"\n"+c.Failure.Text, 3)
			case c.Error != nil:
				res.Status, res.Reason = Failed, firstLines(c.Error.Message+"\n"+c.Error.Text, 3)
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				res.Status = Skipped
				if c.Skipped != nil {
					res.Reason = strings.TrimPrefix(c.Skipped.Message, "skipped - ")
				}
			case c.Status == "passed" || c.Status == "":
				res.Status = Passed
			default:
				// interrupted, aborted, timedout, panicked
				res.Status, res.Reason = Failed, c.Status
			}
			if leaf != "It" {
				if res.Status != Failed {
					continue
				}
				res.Name, res.SuiteNode = strings.TrimSpace("["+leaf+"] "+name), true
			}
			out = append(out, res)
		}
	}
	return out, nil
}

func firstLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "[FAILED]")); l != "" {
			lines = append(lines, l)
		}
		if len(lines) == n {
			break
		}
	}
	return strings.Join(lines, " ")
}

// Select keeps the results of the tests a selection chose, in name order:
// those its focus matches and its exclusions do not, and those it lists;
// of those, the ones it skips are marked
// skipped with the selection's reason (the suite reports them skipped
// with no reason of ours).
func Select(results []Result, sel Selection) []Result {
	var out []Result
	for _, r := range results {
		if r.SuiteNode {
			out = append(out, r) // failed: every test after it is in doubt
			continue
		}
		listed := sel.Listed != nil && sel.Listed.MatchString(r.Name)
		if !listed && (!sel.Focus.MatchString(r.Name) || (sel.Exclude != nil && sel.Exclude.MatchString(r.Name))) {
			continue
		}
		if why := sel.skipReason(r.Name); why != "" {
			r.Status, r.Reason, r.BySelection = Skipped, why, true
		} else if r.Status == Skipped && r.Reason == "" {
			r.Reason = "skipped by the suite"
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Counts are a run's totals.
type Counts struct{ Passed, Failed, Skipped int }

// Count totals results by status.
func Count(results []Result) Counts {
	var c Counts
	for _, r := range results {
		switch r.Status {
		case Passed:
			c.Passed++
		case Failed:
			c.Failed++
		case Skipped:
			c.Skipped++
		}
	}
	return c
}

// String is the closing line a run prints.
func (c Counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.Passed, c.Failed, c.Skipped)
}

// Run describes a run for the report's head.
type Run struct {
	Command    string
	Selection  Selection
	Kubernetes string // the release the suite and the cluster come from
	Versions   []string
	Started    time.Time
	Took       time.Duration
	// Notes are lines about the run the table does not show (images no
	// recipe builds, for example).
	Notes []string
}

// WriteMarkdown writes the report CONFORMANCE.md holds.
func WriteMarkdown(w io.Writer, run Run, results []Result) error {
	c := Count(results)
	var b strings.Builder
	fmt.Fprintf(&b, "# Kubernetes' own tests on vpcnet\n\n")
	fmt.Fprintf(&b, "Written by `%s` on %s (took %s). ", run.Command, run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Took.Round(time.Second))
	fmt.Fprintf(&b, "Kubernetes' e2e tests at %s, built from the Go module proxy (tools/e2e), unmodified, run on the local cloud's real kubelets with vpcnet installed from deploy/vpcnet.yaml; the results below are read from the suite's JUnit report.\n\n", run.Kubernetes)
	fmt.Fprintf(&b, "**%s** (selection `%s`).\n\n", c, run.Selection.Name)
	for _, v := range run.Versions {
		fmt.Fprintf(&b, "- %s\n", v)
	}
	if len(run.Versions) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Focus: `%s`\n\n", run.Selection.Focus)
	if len(run.Selection.Skips) > 0 {
		b.WriteString("Skipped, each with its reason (about the local cloud, not vpcnet):\n\n")
		for _, s := range run.Selection.Skips {
			fmt.Fprintf(&b, "- `%s`: %s\n", s.Pattern, s.Reason)
		}
		b.WriteString("\n")
	}
	for _, n := range run.Notes {
		fmt.Fprintf(&b, "%s\n\n", n)
	}
	b.WriteString("| test | result | time | reason |\n|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdEscape(r.Name), r.Status, r.Duration.Round(time.Second), mdEscape(r.Reason))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
