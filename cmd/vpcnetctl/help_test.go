package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// helpOutputs is every vpcnetctl command's --help, by command line: each
// command of `vpcnetctl help`, each `sim` command, and the kubectl plugin.
func helpOutputs(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	capture := func(name string, f func(stdout, stderr *bytes.Buffer) int) {
		var stdout, stderr bytes.Buffer
		if code := f(&stdout, &stderr); code != 0 {
			t.Errorf("%s --help: exit %d\n%s%s", name, code, &stdout, &stderr)
		}
		out[name] = stdout.String() + stderr.String()
	}
	for _, c := range commands() {
		if c.name == "sim" {
			continue
		}
		capture("vpcnetctl "+c.name, func(stdout, stderr *bytes.Buffer) int {
			return run(ctx, []string{c.name, "--help"}, stdout, stderr)
		})
	}
	var sims []string
	for name := range simCommands() {
		sims = append(sims, name)
	}
	sort.Strings(sims)
	for _, name := range sims {
		capture("vpcnetctl sim "+name, func(stdout, stderr *bytes.Buffer) int {
			return run(ctx, []string{"sim", name, "--help"}, stdout, stderr)
		})
	}
	capture("kubectl vpcnet", func(stdout, stderr *bytes.Buffer) int {
		return runKubectl(ctx, []string{"--help"}, stdout, stderr)
	})
	return out
}

// valueName is what a flag's line may show after its name: a name in
// capitals (FILE, DIR, NAME=VALUE), which a back-quoted word in the usage
// sets, or the flag package's own for its type.
var valueName = regexp.MustCompile(`^([A-Z][A-Z0-9_|=.-]*|string|int|uint|int64|uint64|float|duration|value)$`)

// Issue 24: the flag package takes the first back-quoted words of a
// flag's usage as the name of its value, so "(`make kube-bins`)" printed
// `-kube-bin make kube-bins` and `-kubernetes make cluster-demo` (a bool
// that takes no value). Every flag line of every command shows its name
// and at most one value name.
func TestNoFlagsUsageIsGarbledByItsBackQuotes(t *testing.T) {
	for cmd, help := range helpOutputs(t) {
		lines := strings.Split(help, "\n")
		i := slices.Index(lines, "flags:")
		if i < 0 {
			continue // a command with no flags of its own (`sim pod`'s verbs print theirs)
		}
		for _, line := range lines[i+1:] {
			if !strings.HasPrefix(line, "  -") {
				continue // a usage line ("    \t...") or the text after
			}
			head, _, _ := strings.Cut(line, "\t") // one-letter bools have their usage on the line
			f := strings.Fields(head)
			if len(f) > 2 || (len(f) == 2 && !valueName.MatchString(f[1])) {
				t.Errorf("%s --help: %q: the flag's value name is garbled; back-quote only the value's name (`FILE`) in its usage", cmd, strings.TrimSpace(line))
			}
		}
	}
}

// `vpcnetctl --version` answers as every vpcnet binary does, without
// asking the agent.
func TestVersionFlagPrintsThisBinarysVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{arg}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", arg, code, &stderr)
		}
		if !strings.HasPrefix(stdout.String(), "vpcnetctl ") || !strings.Contains(stdout.String(), "(go") {
			t.Errorf("%s printed %q, want \"vpcnetctl VERSION (goX)\"", arg, stdout.String())
		}
	}
}
