package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// defaultStateDir is where `sim up` keeps the cluster's state so that
// later commands find it.
const defaultStateDir = "/run/vpcnet-sim"

// simFlags makes the flag set of `vpcnetctl sim NAME`. Its usage, printed
// for -h and --help, is the synopsis and every flag.
func simFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("vpcnetctl sim "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vpcnetctl sim %s %s\n", name, synopsis)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseSimFlags parses flags wherever they stand among the positional
// arguments and returns those. -h or --help has printed the usage and
// returns flag.ErrHelp, which runSim turns into exit status 0; any other
// mistake is a usage error (exit 2) pointing at --help.
func parseSimFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, flag.ErrHelp
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v (see `%s --help`)", errUsage, err, fs.Name())
	}
	return pos, nil
}

// wantHelp reports whether args ask for help before any flag set exists
// (the verb of `sim pod`, `sim agent`).
func wantHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help")
}

// absState is the state directory as an absolute path: every file and
// name of the cluster derives from it, so `--state x` from two working
// directories must not mean the same cluster by accident.
func absState(state string) (string, error) {
	abs, err := filepath.Abs(state)
	if err != nil {
		return "", fmt.Errorf("state directory %q: %w", state, err)
	}
	return abs, nil
}

// simCmd spells a vpcnetctl command for a hint, with the --state in use,
// so a hint pasted as printed acts on the same cluster. The default state
// directory is left out, as the user left it out.
func simCmd(state string, args ...string) string {
	cmd := "vpcnetctl sim " + strings.Join(args, " ")
	if state != "" && filepath.Clean(state) != defaultStateDir {
		cmd += " --state " + shellQuote(state)
	}
	return cmd
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
