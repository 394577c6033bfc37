package ipam

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("planner.rewrite", false, "rewrite the expected output in testdata/planner/*.txt")

// TestPlannerScripts runs the multi-step scenarios in testdata/planner:
// each file is commands, each followed by "----" and its expected output
// up to a blank line; -planner.rewrite regenerates the output. The
// commands are in scriptNode.run.
func TestPlannerScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/planner/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/planner: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := newScriptNode()
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		cmdLine := i + 1
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", path, cmdLine, line)
		}
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		got, err := n.run(line)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", path, cmdLine, line, err)
		}
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, cmdLine, line, got, strings.Join(want, "\n"))
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", line, got)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scriptNode is one simulated node: limits, settings, the pool and a
// clock. Pods take the first free address by device index, as the pool
// does; requests that find none wait and are served after each step.
type scriptNode struct {
	lim  Limits
	cfg  PlanConfig
	snap Snapshot
	now  time.Time
}

func newScriptNode() *scriptNode {
	return &scriptNode{lim: m5large, cfg: testConfig(), now: t0}
}

// run executes one command and returns its output:
//
//	limits enis=N ipv4=N        instance limits (default m5.large: 3, 10)
//	config key=value...         settings on top of aws-node's defaults:
//	                            warm-eni warm-ip min-ip warm-prefix max-eni
//	                            max-pods prefix custom grace
//	node                        a fresh node: the primary ENI, no addresses
//	pods add=N | del=N          start N pods (waiting if no address is free)
//	                            or stop N (their addresses start cooling)
//	cooldown                    every cooling address becomes free (and
//	                            serves waiting pods)
//	tick D                      advance the clock by duration D
//	plan                        show the next plan without applying it
//	step                        plan, apply, serve waiting pods, show state
//	settle                      step until a plan is empty (at most 10),
//	                            then show its shortfall and the state
func (n *scriptNode) run(line string) (string, error) {
	fields := strings.Fields(line)
	args := map[string]string{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	switch fields[0] {
	case "limits":
		return "ok", n.setLimits(args)
	case "config":
		return "ok", n.setConfig(args)
	case "node":
		n.snap = Snapshot{ENIs: []ENIState{{ENI: ENI{ID: "eni-0", Primary: true, SubnetID: "subnet-a",
			PrimaryIP: numAddr(10<<24 | 4), CreatedAt: n.now}}}}
		return n.state(), nil
	case "pods":
		if v, ok := args["add"]; ok {
			k, err := strconv.Atoi(v)
			n.startPods(k)
			return n.state(), err
		}
		k, err := strconv.Atoi(args["del"])
		n.stopPods(k)
		return n.state(), err
	case "cooldown":
		n.cooldown()
		n.startPods(0)
		return n.state(), nil
	case "tick":
		d, err := time.ParseDuration(fields[len(fields)-1])
		n.now = n.now.Add(d)
		return fmt.Sprintf("now t0+%v", n.now.Sub(t0)), err
	case "plan":
		actions, short := Plan(n.snap, n.cfg, n.lim, n.now)
		return renderPlan(actions, short), nil
	case "step":
		out, done, err := n.step()
		if done {
			out = strings.TrimSpace("no actions\n" + out)
		}
		return out + "\n" + n.state(), err
	case "settle":
		var b strings.Builder
		for pass := 1; pass <= 10; pass++ {
			out, done, err := n.step()
			if err != nil {
				return "", err
			}
			if done {
				// A settled pass plans nothing; all it can say is a shortfall.
				fmt.Fprintf(&b, "settled%s\n%s", strings.TrimPrefix(out, "shortfall"), n.state())
				return b.String(), nil
			}
			fmt.Fprintf(&b, "pass %d:\n%s\n", pass, dropShortfall(out))
		}
		return "", fmt.Errorf("still planning after 10 passes")
	}
	return "", fmt.Errorf("unknown command %q", fields[0])
}

func (n *scriptNode) step() (out string, done bool, err error) {
	actions, short := Plan(n.snap, n.cfg, n.lim, n.now)
	if n.snap, err = ApplyActions(n.snap, actions, n.lim, n.now); err != nil {
		return "", false, err
	}
	n.startPods(0)
	out = renderPlan(actions, short)
	if len(actions) == 0 {
		out = strings.TrimPrefix(strings.TrimPrefix(out, "no actions"), "\n")
	}
	return out, len(actions) == 0, nil
}

func dropShortfall(out string) string {
	if i := strings.Index(out, "\nshortfall: "); i >= 0 {
		return out[:i]
	}
	return out
}

func renderPlan(actions []Action, short Shortfall) string {
	var lines []string
	for _, a := range actions {
		lines = append(lines, a.String())
	}
	if len(actions) == 0 {
		lines = append(lines, "no actions")
	}
	if short.Short() {
		lines = append(lines, "shortfall: "+short.String())
	}
	return strings.Join(lines, "\n")
}
