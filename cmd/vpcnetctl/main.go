// Command vpcnetctl is vpcnet's operator CLI. Each subcommand lives in its
// own file; this one only dispatches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand: vpcnetctl NAME ARGS...
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands; add one by writing its file and a line
// here.
func commands() []command {
	return []command{
		{"sim", "run the local cloud (EC2 API and IMDS emulator)", runSim},
		{"doctor", "name what is wrong with this node and the fix", runDoctor},
	}
}

// errUsage marks a mistake on the command line: exit status 2, and the
// message already names the fix.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "vpcnetctl %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "vpcnetctl %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "vpcnetctl: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: vpcnetctl COMMAND [ARGS]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

// parseInterspersed parses flags wherever they appear among the
// positional arguments, so `pod add NODE NAME --state DIR` works as well as
// `pod add --state DIR NODE NAME`. It returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
