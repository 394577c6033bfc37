package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// microArgs are the Go benchmarks of the pure core: pool, planner,
// checkpoint codec and store.
var microArgs = []string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "5", "./ipam/", "./checkpoint/..."}

// microWhat says what each benchmark measures; the benchmarks' own doc
// comments say it at length.
var microWhat = map[string]string{
	"BenchmarkPlan/secondary/steady":            "one planner pass, 250 pods on ~1,000 addresses, nothing to do",
	"BenchmarkPlan/secondary/release":           "one planner pass that releases ~740 surplus addresses",
	"BenchmarkPlan/prefix/steady":               "one planner pass, 250 pods on 63 prefixes",
	"BenchmarkAssignUnassign/secondary-ips":     "one Assign + Unassign, 250 pods held, ~1,000 /32 addresses on 4 ENIs",
	"BenchmarkAssignUnassign/prefix-delegation": "the same with /28 prefixes",
	"BenchmarkEncode250":                        "encode a checkpoint of 250 assignments",
	"BenchmarkDecode250":                        "decode it (start-up only)",
	"BenchmarkSave250":                          "encode + write temp + fsync + rename + fsync dir, 250 assignments",
}

// benchLine is one result line of `go test -bench`.
type benchLine struct {
	name   string // without the -GOMAXPROCS suffix
	nsOp   float64
	bytes  float64
	allocs float64
}

// parseBench reads `go test -bench -benchmem` output, in the order the
// benchmarks first appear.
func parseBench(r io.Reader) (order []string, runs map[string][]benchLine, err error) {
	runs = map[string][]benchLine{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		l := benchLine{name: f[0]}
		if i := strings.LastIndexByte(l.name, '-'); i > 0 {
			if _, err := strconv.Atoi(l.name[i+1:]); err == nil {
				l.name = l.name[:i]
			}
		}
		// After the iteration count come value-unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				l.nsOp = v
			case "B/op":
				l.bytes = v
			case "allocs/op":
				l.allocs = v
			}
		}
		if _, seen := runs[l.name]; !seen {
			order = append(order, l.name)
		}
		runs[l.name] = append(runs[l.name], l)
	}
	return order, runs, sc.Err()
}

// microTable renders the runs: ns/op as min / median / max, memory as the
// median (it does not vary between runs).
func microTable(order []string, runs map[string][]benchLine) Table {
	t := Table{Title: "Core: Go micro-benchmarks of the pool, planner and checkpoint", Header: []string{"benchmark", "what", "min", "median", "max", "B/op", "allocs/op"}}
	for _, name := range order {
		var ns, bs, as []float64
		for _, l := range runs[name] {
			ns, bs, as = append(ns, l.nsOp), append(bs, l.bytes), append(as, l.allocs)
		}
		d := Summarize(ns)
		t.AddRow("`"+name+"`", microWhat[name], fmtNS(d.Min), fmtNS(d.P50), fmtNS(d.Max),
			fmt.Sprintf("%.0f", Summarize(bs).P50), fmt.Sprintf("%.0f", Summarize(as).P50))
	}
	return t
}

func fmtNS(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

// micro is scenario 6: the Go benchmarks, run by `go test` in the module.
func (b *bench) micro(ctx context.Context, res *Result) error {
	cmd := exec.CommandContext(ctx, "go", microArgs...)
	cmd.Dir = b.opts.module
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(microArgs, " "), err, out)
	}
	order, runs, err := parseBench(strings.NewReader(string(out)))
	if err != nil {
		return err
	}
	if len(order) == 0 {
		return fmt.Errorf("go %s printed no benchmark results", strings.Join(microArgs, " "))
	}
	t := microTable(order, runs)
	t.Notes = append(t.Notes, "command: go "+quoteArgs(microArgs))
	res.Tables = append(res.Tables, t)
	for _, name := range order {
		var ns []float64
		for _, l := range runs[name] {
			ns = append(ns, l.nsOp)
		}
		res.figure(name+" ns/op median", Summarize(ns).P50)
	}
	return nil
}

func quoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "^$ ") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
