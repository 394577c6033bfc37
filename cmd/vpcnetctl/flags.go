package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vpcnet/vpcnet/introspect"
)

// cmdFlags is the flag set of `vpcnetctl NAME`. Its usage goes where the
// caller asks (stdout for --help), never mixed into error output.
type cmdFlags struct {
	*flag.FlagSet
	synopsis string
	about    string
}

func newCmdFlags(name, synopsis, about string) *cmdFlags {
	fs := flag.NewFlagSet("vpcnetctl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse prints the usage itself, to stdout for --help
	return &cmdFlags{FlagSet: fs, synopsis: synopsis, about: about}
}

func (f *cmdFlags) printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s %s\n", f.Name(), f.synopsis)
	if f.about != "" {
		fmt.Fprintf(w, "\n%s\n", f.about)
	}
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		f.SetOutput(w)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
}

// parse parses flags among the positional arguments and returns those. On
// -h or --help it prints the usage to stdout and returns flag.ErrHelp
// (exit 0); any other mistake is errUsage (exit 2).
func (f *cmdFlags) parse(args []string, stdout io.Writer) ([]string, error) {
	pos, err := parseInterspersed(f.FlagSet, args)
	if errors.Is(err, flag.ErrHelp) {
		f.printUsage(stdout)
		return nil, flag.ErrHelp
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v (see `%s --help`)", errUsage, err, f.Name())
	}
	return pos, nil
}

// agentFlags are the flags of every command that reads the agent.
type agentFlags struct {
	agent  string
	output string
}

func (a *agentFlags) register(f *cmdFlags) {
	f.StringVar(&a.agent, "agent", introspect.DefaultAddr, "the agent's introspection address: host:port or URL (its INTROSPECTION_BIND_ADDRESS)")
	f.StringVar(&a.output, "o", "table", "output format: table or json")
}

func (a *agentFlags) check() error {
	switch a.output {
	case "table", "json":
		return nil
	}
	return fmt.Errorf("%w: -o %q: want table or json", errUsage, a.output)
}

func (a *agentFlags) client() *introspect.Client {
	return &introspect.Client{Base: a.agent}
}

// noArgs refuses positional arguments a command does not take.
func noArgs(f *cmdFlags, pos []string) error {
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected %q; want `%s %s`", errUsage, strings.Join(pos, " "), f.Name(), f.synopsis)
	}
	return nil
}
