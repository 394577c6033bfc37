package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const doc = `# Benchmarks

Prose a person wrote.

<!-- begin vpcnet-bench:run -->
old run
<!-- end vpcnet-bench:run -->

<!-- begin vpcnet-bench:goals -->
old goals
<!-- end vpcnet-bench:goals -->

## Warm
<!-- begin vpcnet-bench:warm -->
old warm figures
<!-- end vpcnet-bench:warm -->
More prose.
`

func record(results ...*Result) *Record {
	return &Record{Command: "make bench", Machine: Machine{CPU: "Test CPU", CPUs: 2, Kernel: "6.1", Go: "go1.26", MemMiB: 4096},
		Started: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), Results: results}
}

func TestPartialRunRewritesOnlyItsScenario(t *testing.T) {
	warm := &Result{Scenario: "warm", Tables: []Table{{Title: "Warm ADD", Header: []string{"a"}, Rows: [][]string{{"1"}}}}}
	out, err := renderSections([]byte(doc), record(warm))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"Prose a person wrote.", "More prose.", "old run", "old goals", "**Warm ADD**", "by `make bench` on 2 vCPU Test CPU"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old warm figures") {
		t.Errorf("old figures kept:\n%s", s)
	}
}

func TestFullRunRewritesRunAndGoals(t *testing.T) {
	var results []*Result
	for _, sc := range scenarios {
		results = append(results, &Result{Scenario: sc.name})
	}
	rec := record(results...)
	rec.Goals = []GoalLine{{Goal: "RSS ≤ 25 MiB", Measured: "30 MiB", Met: false}}
	d := doc
	for _, sc := range scenarios[1:] {
		d += "\n" + beginMarker(sc.name) + "\n" + endMarker(sc.name) + "\n"
	}
	out, err := renderSections([]byte(d), rec)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "old run") || strings.Contains(s, "old goals") {
		t.Errorf("run or goals not rewritten:\n%s", s)
	}
	if !strings.Contains(s, "| RSS ≤ 25 MiB | 30 MiB | **missed** |") || !strings.Contains(s, "Date: 2026-11-22") {
		t.Errorf("goals or date missing:\n%s", s)
	}
}

func TestAMissingSectionIsNamed(t *testing.T) {
	_, err := renderSections([]byte("# nothing generated here\n"), record(&Result{Scenario: "churn"}))
	if err == nil || !strings.Contains(err.Error(), beginMarker("churn")) {
		t.Errorf("err = %v, want one that shows the marker to add", err)
	}
}

func TestEditConfListKeepsOnlyThePluginAndPointsItsLog(t *testing.T) {
	in := `{"cniVersion":"1.1.0","name":"aws-cni","plugins":[{"type":"vpcnet","socket":"/run/x.sock"},{"type":"portmap","capabilities":{"portMappings":true}}]}`
	out, err := editConfList([]byte(in), "/tmp/plugin.log", []string{"vpcnet"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Name    string           `json:"name"`
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "aws-cni" || len(got.Plugins) != 1 || got.Plugins[0]["type"] != "vpcnet" ||
		got.Plugins[0]["pluginLogFile"] != "/tmp/plugin.log" || got.Plugins[0]["socket"] != "/run/x.sock" {
		t.Errorf("edited conflist = %s", out)
	}
	if _, err := editConfList([]byte(in), "", []string{"bridge"}); err == nil {
		t.Error("keeping a plugin type the list lacks gave no error")
	}
}
