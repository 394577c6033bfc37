package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/bundle"
	"github.com/vpcnet/vpcnet/introspect"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// executable is this vpcnetctl, which the bundle runs as `doctor`; a
// test replaces it, since its own binary is the test binary.
var executable = os.Executable

func runBundle(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o bundle.Options
	var logs stringList
	f := newCmdFlags("bundle", "[-o FILE] [--agent ADDR] [--agent-log FILE]...",
		"Write one .tar.gz for a support case: the agent's /v1 endpoints and metrics, its log\n"+
			"(the end), the checkpoint, ip link/addr/rule/neigh and every route table, the nftables\n"+
			"ruleset, the CNI configuration and plugin versions, doctor's findings and versions.\n"+
			"Secrets are redacted. Works with the agent down: MANIFEST in the bundle says, part by\n"+
			"part, what was collected and why not. Run it on the node as root (it needs ip and nft).")
	out := f.String("o", "", "the bundle's `FILE`, or - for stdout (kubectl exec POD -- vpcnetctl bundle -o - > b.tar.gz); default vpcnet-bundle-HOST-TIME.tar.gz here")
	f.StringVar(&o.Agent, "agent", introspect.DefaultAddr, "the agent's introspection address (INTROSPECTION_BIND_ADDRESS)")
	f.StringVar(&o.Metrics, "metrics", bundle.DefaultMetrics, "the agent's metrics address (VPCNET_METRICS_BIND_ADDRESS)")
	f.Var(&logs, "agent-log", "the agent's log file (repeatable; default: the kubelet's logs of the vpcnet pod)")
	// The paths default to the agent's own (its /v1/config), and are
	// handed to the bundle's doctor when given, so both read one place.
	f.StringVar(&o.Checkpoint, "checkpoint", "", "the agent's checkpoint `FILE`; default: the agent's VPCNET_STATE_DIR/checkpoint.json, else "+bundle.DefaultCheckpoint)
	f.StringVar(&o.CNIConfDir, "cni-conf-dir", "", "the CNI configuration `DIR`; default: the agent's VPCNET_CNI_CONF_DIR, else "+bundle.DefaultCNIConfDir)
	f.StringVar(&o.CNIBinDir, "cni-bin-dir", "", "the CNI plugin `DIR`; default: the agent's VPCNET_CNI_BIN_DIR, else "+bundle.DefaultCNIBinDir)
	logMiB := f.Int("log-size", bundle.DefaultLogLimit>>20, "MiB kept from the end of each log")
	maxMiB := f.Int("max-size", bundle.DefaultTotalLimit>>20, "MiB of the whole bundle, before compression")
	pos, err := f.parse(args, stdout)
	if err != nil {
		return err
	}
	if err := noArgs(f, pos); err != nil {
		return err
	}
	if *logMiB < 1 || *maxMiB < 1 {
		return fmt.Errorf("%w: --log-size and --max-size are MiB, at least 1", errUsage)
	}
	if os.Getenv(bundle.NestedEnv) != "" {
		return fmt.Errorf("%s is set: this vpcnetctl was started by a bundle being taken, and does not take one itself", bundle.NestedEnv)
	}
	o.AgentLogs = logs
	o.LogLimit = *logMiB << 20
	if self, err := executable(); err == nil {
		o.Self = self
	}
	now := time.Now()
	path := *out
	if path == "" {
		host, _ := os.Hostname()
		path = fmt.Sprintf("vpcnet-bundle-%s-%s.tar.gz", orDash(host), now.UTC().Format("20060102T150405Z"))
	}
	report := stdout
	var size int64
	var entries []bundle.Entry
	if path == "-" {
		// The archive is stdout; the summary goes to stderr.
		report = stderr
		cw := &countingWriter{w: stdout}
		if entries, err = collect(ctx, cw, now, o, *maxMiB<<20); err != nil {
			return err
		}
		size, path = cw.n, "stdout"
	} else if size, entries, err = writeBundle(ctx, path, now, o, *maxMiB<<20); err != nil {
		return err
	}
	failed := 0
	for _, e := range entries {
		if e.Err != nil {
			failed++
		}
	}
	fmt.Fprintf(report, "wrote %s: %s, %d parts, %d not collected (see MANIFEST inside)\n", path, humanBytes(size), len(entries), failed)
	return nil
}

// writeBundle writes the bundle next to path and renames it into place,
// so a bundle at path is always complete.
func writeBundle(ctx context.Context, path string, now time.Time, o bundle.Options, total int) (int64, []bundle.Entry, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".vpcnet-bundle-*")
	if err != nil {
		return 0, nil, fmt.Errorf("bundle %s: %w (choose another place with -o)", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	entries, err := collect(ctx, tmp, now, o, total)
	if err != nil {
		tmp.Close()
		return 0, nil, err
	}
	st, err := tmp.Stat()
	if err == nil {
		err = tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	return st.Size(), entries, nil
}

// collect writes a whole bundle to w.
func collect(ctx context.Context, w io.Writer, now time.Time, o bundle.Options, total int) ([]bundle.Entry, error) {
	a := bundle.NewArchive(w, now, 0, total)
	if err := bundle.Collect(ctx, a, o); err != nil {
		return nil, err
	}
	if err := a.Close(); err != nil {
		return nil, err
	}
	return a.Entries(), nil
}

// countingWriter counts what passes through, for the size printed.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func humanBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
