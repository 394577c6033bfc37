package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/version"
)

// commandLine answers --version and --help before anything starts, and
// refuses every other argument: vpcnetd takes its configuration from the
// environment only, so an argument is always a mistake (a flag from
// another CNI's manifest, say) and starting anyway would hide it. done
// says the process should exit with code.
func commandLine(args []string, stdout, stderr io.Writer) (code int, done bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintf(stdout, "vpcnetd %s\n", version.Get())
		return 0, true
	case "--help", "-help", "-h", "help":
		usage(stdout)
		return 0, true
	}
	fmt.Fprintf(stderr, "vpcnetd: unexpected argument %q: vpcnetd takes no arguments, only environment variables (vpcnetd --help lists them)\n", args[0])
	return 2, true
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `usage: vpcnetd [--version | --help]

vpcnetd is vpcnet's node agent (version %s). It takes no arguments:
every setting comes from an environment variable, read once at start; an
invalid one stops it with a line naming the variable, its value and what is
allowed. docs/settings.md explains each; GET /v1/config on the running
agent's introspection endpoint shows the values in effect.

settings (environment variable, default):
`, version.Get())
	// The defaults as the agent itself computes them: the table cannot
	// drift from what config.Load reads.
	cfg, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		fmt.Fprintf(w, "  (cannot list them: %v)\n", err)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range cfg.Settings() {
		def := s.Default
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(tw, "  %s\t%s\n", s.Name, def)
	}
	tw.Flush()
}
