package bundle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vpcnet/vpcnet/introspect"
)

func addLogs(_ context.Context, a *Archive, o Options) error {
	paths := o.AgentLogs
	explicit := len(paths) > 0
	if !explicit {
		for _, g := range DefaultLogGlobs {
			m, _ := filepath.Glob(g) // the patterns are constant and valid
			paths = append(paths, m...)
		}
	}
	if len(paths) == 0 {
		return a.Add("logs/vpcnetd.log", nil, fmt.Errorf("no agent log found at %s: give the file with --agent-log (the local cloud writes STATE/NODE/vpcnetd.log)", strings.Join(DefaultLogGlobs, " or ")))
	}
	for i, p := range paths {
		data, err := tail(p, o.LogLimit)
		name := fmt.Sprintf("logs/%02d-%s", i, filepath.Base(p))
		if err := a.Add(name, data, err); err != nil {
			return err
		}
	}
	return nil
}

// tail reads the last limit bytes of the file at path, from the start of
// a line.
func tail(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	off := max(st.Size()-int64(limit), 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, int64(limit)))
	if err != nil {
		return data, fmt.Errorf("agent log %s: %w", path, err)
	}
	if off > 0 {
		if i := strings.IndexByte(string(data), '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, nil
}

func addCheckpoint(_ context.Context, a *Archive, o Options) error {
	data, err := readCapped(o.Checkpoint, DefaultPartLimit)
	if err != nil {
		err = fmt.Errorf("checkpoint: %w (give its path with --checkpoint; it is VPCNET_STATE_DIR/checkpoint.json)", err)
	}
	return a.Add("checkpoint/"+filepath.Base(o.Checkpoint), data, err)
}

func readCapped(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)+1))
}

// addCNI stores the CNI configuration directory's files and, for every
// plugin binary, its VERSION answer and its about line (vpcnet's carries
// its build version).
func addCNI(ctx context.Context, a *Archive, o Options) error {
	confs, err := os.ReadDir(o.CNIConfDir)
	if err != nil {
		if err := a.Add("cni/net.d", nil, fmt.Errorf("CNI configuration directory: %w", err)); err != nil {
			return err
		}
	}
	for _, e := range confs {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := readCapped(filepath.Join(o.CNIConfDir, e.Name()), 1<<20)
		if err := a.Add("cni/net.d/"+e.Name(), data, err); err != nil {
			return err
		}
	}
	bins, err := os.ReadDir(o.CNIBinDir)
	if err != nil {
		return a.Add("cni/plugins.txt", nil, fmt.Errorf("CNI plugin directory: %w", err))
	}
	sort.Slice(bins, func(i, j int) bool { return bins[i].Name() < bins[j].Name() })
	var report strings.Builder
	var failed []string
	for _, b := range bins {
		path := filepath.Join(o.CNIBinDir, b.Name())
		info, err := os.Stat(path) // following symlinks, as the runtime does
		if err != nil || !info.Mode().IsRegular() || info.Mode()&0o111 == 0 {
			continue
		}
		out, _, err := o.Run(ctx, path, nil, []string{"CNI_COMMAND=VERSION"})
		fmt.Fprintf(&report, "%s\n  VERSION: %s\n", b.Name(), strings.TrimSpace(string(out)))
		if err != nil {
			fmt.Fprintf(&report, "  VERSION failed: %v\n", err)
			failed = append(failed, b.Name())
		}
		// With no CNI_COMMAND a plugin prints its about string (with
		// its version, for vpcnet and the reference plugins) on stderr.
		if _, about, _ := o.Run(ctx, path, nil, []string{"CNI_COMMAND="}); len(about) > 0 {
			fmt.Fprintf(&report, "  about: %s\n", strings.SplitN(strings.TrimSpace(string(about)), "\n", 2)[0])
		}
	}
	var err2 error
	if len(failed) > 0 {
		err2 = fmt.Errorf("VERSION failed for %s", strings.Join(failed, ", "))
	}
	return a.Add("cni/plugins.txt", []byte(report.String()), err2)
}

// NestedEnv is set in the environment of the commands the bundle runs
// itself (doctor): vpcnetctl refuses to take a bundle inside a bundle, so
// a mistake can never make them run each other without end.
const NestedEnv = "VPCNET_BUNDLE_RUNNING"

var errNoSelf = errors.New("doctor not run: vpcnetctl's own path is unknown")

// addDoctor runs `vpcnetctl doctor -o json`, with the agent's address
// and the paths the bundle was told (told, Options.doctorFlags), so that
// doctor reads what the bundle collected. Doctor exits non-zero when it
// finds an error, so its output is kept whenever there is any; only no
// output at all (no such command, a crash) is the part's error.
func addDoctor(ctx context.Context, a *Archive, o Options, told []string) error {
	if o.Self == "" {
		return a.Add("doctor.json", nil, errNoSelf)
	}
	args := []string{"doctor", "-o", "json"}
	if o.Agent != introspect.DefaultAddr {
		args = append(args, "--agent", o.Agent)
	}
	args = append(args, told...)
	out, _, err := o.Run(ctx, o.Self, args, []string{NestedEnv + "=1"})
	if err != nil && len(out) > 0 {
		err = nil // findings of severity error: the bundle has them
	}
	return a.Add("doctor.json", out, err)
}
