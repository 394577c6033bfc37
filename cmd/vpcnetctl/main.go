// Command vpcnetctl is vpcnet's operator CLI. Each subcommand lives in its
// own file; this one only dispatches and turns errors into exit codes.
//
// Installed as kubectl-vpcnet it is a kubectl plugin: `kubectl vpcnet
// status NODE` reaches the node's agent through the API server
// (kubectl.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/version"
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
		{"status", "the agent's readiness, pool counts, planned change and problems", runStatus},
		{"enis", "the node's ENIs and their addresses", runENIs},
		{"pods", "which pod holds which address", runPods},
		{"config", "the agent's settings, with defaults", runConfig},
		{"policy", "NetworkPolicy enforcement on the node, and a pod's verdicts", runPolicy},
		{"bundle", "write a support bundle (.tar.gz), also when the agent is down", runBundle},
		{"version", "this binary's version and the agent's, and whether they match", runVersion},
		{"sim", "run the local cloud (EC2 API and IMDS emulator)", runSim},
		{"doctor", "name what is wrong with this node and the fix", runDoctor},
	}
}

// Exit codes, part of the interface scripts use (`vpcnetctl help`).
const (
	exitOK          = 0
	exitFailed      = 1 // the agent answered but is not ready, or the command failed
	exitUsage       = 2
	exitUnreachable = 3
)

const exitCodesHelp = `exit codes:
  0  ok (status: the agent is ready)
  1  the agent answered but is not ready (status), or the command failed
  2  usage error
  3  the agent is not reachable (not running, or another --agent address)`

// errUsage marks a mistake on the command line: exit status 2, and the
// message already names the fix.
var errUsage = errors.New("usage")

// errNotReady is status's answer when the agent is up but not ready: exit
// status 1 after the report is printed.
var errNotReady = errors.New("the agent is not ready")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if isKubectlPlugin(os.Args[0]) {
		code = runKubectl(ctx, os.Args[1:], os.Stdout, os.Stderr)
	} else {
		code = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

// isKubectlPlugin says whether the binary was started as kubectl's plugin:
// kubectl runs `kubectl-vpcnet` for `kubectl vpcnet`.
func isKubectlPlugin(argv0 string) bool {
	return strings.HasPrefix(filepath.Base(argv0), "kubectl-vpcnet")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if askedHelp(args) {
		usage(stdout)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		// The binary's own, as every vpcnet binary answers --version;
		// `vpcnetctl version` also asks the agent.
		fmt.Fprintf(stdout, "vpcnetctl %s\n", version.Get())
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return exitCode(c.run(ctx, args[1:], stdout, stderr), "vpcnetctl "+c.name, stderr)
		}
	}
	fmt.Fprintf(stderr, "vpcnetctl: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

// exitCode prints err, if any, and maps it to the documented exit code.
func exitCode(err error, prefix string, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errNotReady):
		// The report already says why; one line for the log.
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitFailed
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitUsage
	case introspect.IsUnreachable(err):
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitUnreachable
	default:
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitFailed
	}
}

// askedHelp says whether args ask for help rather than name a command.
func askedHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help")
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: vpcnetctl COMMAND [ARGS]; every command takes --help\n       vpcnetctl --version\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nstatus, enis, pods, config and policy read the agent's introspection endpoint\n"+
		"(--agent ADDR, default %s, the agent's INTROSPECTION_BIND_ADDRESS)\n"+
		"and print tables, or JSON with -o json.\n\n%s\n\n"+
		"Installed as kubectl-vpcnet: kubectl vpcnet status|doctor|policy NODE (see kubectl vpcnet --help).\n",
		introspect.DefaultAddr, exitCodesHelp)
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
