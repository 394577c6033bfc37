package simcluster

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
)

// Everything a cluster makes outside its state directory is written down
// in it, so that removing a cluster removes exactly what it made and never
// what another cluster on the same machine made: several clusters (and
// other people's tests) run side by side, and a sweep by name prefix once
// deleted a running cluster's namespaces.
//
//   - namespacesFile lists every network namespace, one name a line,
//     appended right after the namespace is created (by the fabric, and by
//     AddPod from whichever process runs it; O_APPEND keeps the lines of
//     concurrent writers whole);
//   - each node's agentPIDFile holds its vpcnetd's process ID and start
//     time while it runs, so a leftover agent is recognised even after
//     its PID was reused.
const (
	namespacesFile = "namespaces"
	agentPIDFile   = "vpcnetd.pid"
)

// namePrefix starts every derived namespace prefix, so `ip netns` shows
// at a glance which namespaces the local cloud made.
const namePrefix = "vpcsim-"

// PrefixFor is the namespace prefix of the cluster whose state lives in
// stateDir: "vpcsim-" and six hex digits of the SHA-256 of the absolute
// path. The same directory always gives the same names; two directories
// give different ones (a clash, one in 16 million, fails at creation
// because a named namespace is never reused, rather than sharing).
func PrefixFor(stateDir string) (string, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return "", fmt.Errorf("state directory %s: %w", stateDir, err)
	}
	sum := sha256.Sum256([]byte(abs))
	return namePrefix + hex.EncodeToString(sum[:3]) + "-", nil
}

var prefixPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,23}$`)

// CheckPrefix says whether p can start namespace names.
func CheckPrefix(p string) error {
	if !prefixPattern.MatchString(p) {
		return fmt.Errorf("prefix %q: use 1 to 24 letters, digits, '.', '_' or '-', starting with a letter or digit (for example team-a-)", p)
	}
	return nil
}

// recordNamespace appends name to the state directory's list.
func recordNamespace(stateDir, name string) error {
	f, err := os.OpenFile(filepath.Join(stateDir, namespacesFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(name + "\n")
	return errors.Join(err, f.Sync(), f.Close())
}

// recordedNamespaces reads the state directory's list, in creation order.
func recordedNamespaces(stateDir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, namespacesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	s := bufio.NewScanner(strings.NewReader(string(data)))
	for s.Scan() {
		if n := strings.TrimSpace(s.Text()); n != "" && !strings.ContainsAny(n, "/\x00") {
			names = append(names, n)
		}
	}
	return names, nil
}

// RemoveRecordedUnder removes what every cluster whose state directory
// lies under root recorded (RemoveRecorded of each): for a test run
// stopped by a signal, whose clusters' own teardown never ran.
func RemoveRecordedUnder(root string) error {
	var errs []error
	walked := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != namespacesFile {
			return nil
		}
		if _, err := RemoveRecorded(filepath.Dir(path)); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	return errors.Join(append(errs, walked)...)
}

// Leftovers is what RemoveRecorded found still there and removed.
type Leftovers struct {
	Agents     []int    // process IDs of agents it killed
	Namespaces []string // namespaces it deleted
}

// RemoveRecorded removes what the cluster with state in stateDir recorded
// and is still there: agents still running (SIGKILL), then the
// namespaces. It touches nothing else, so it is safe while other clusters
// run. The caller makes sure the process that started the cluster is gone
// (see LockHolder), or this runs inside it after its agents stopped.
func RemoveRecorded(stateDir string) (Leftovers, error) {
	var left Leftovers
	var errs []error
	dirs, _ := filepath.Glob(filepath.Join(stateDir, "*", agentPIDFile))
	for _, pidFile := range dirs {
		pid, killed, err := killRecorded(pidFile)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if killed {
			left.Agents = append(left.Agents, pid)
		}
	}
	names, err := recordedNamespaces(stateDir)
	if err != nil {
		return left, fmt.Errorf("read the namespaces recorded in %s: %w", stateDir, err)
	}
	// Pods first, then nodes, router and internet: the reverse of creation.
	for i := len(names) - 1; i >= 0; i-- {
		n := names[i]
		if _, err := os.Stat(filepath.Join("/var/run/netns", n)); err != nil {
			continue // removed already, by its own teardown or an earlier down
		}
		if err := fabric.DeleteNS(n); err != nil {
			errs = append(errs, err)
			continue
		}
		left.Namespaces = append(left.Namespaces, n)
	}
	if len(errs) == 0 {
		if err := os.Remove(filepath.Join(stateDir, namespacesFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return left, errors.Join(errs...)
}

// procRecord identifies a process across PID reuse: its ID and its start
// time in clock ticks since boot (field 22 of /proc/PID/stat).
type procRecord struct {
	PID   int
	Start uint64
}

func (r procRecord) String() string { return fmt.Sprintf("%d %d\n", r.PID, r.Start) }

// procStart reads a process's start time; an error means it is gone.
func procStart(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 overall
}

func writeProcRecord(path string, pid int) error {
	start, err := procStart(pid)
	if err != nil {
		return fmt.Errorf("record process %d: %w", pid, err)
	}
	return os.WriteFile(path, []byte(procRecord{pid, start}.String()), 0o600)
}

func readProcRecord(path string) (procRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return procRecord{}, err
	}
	var r procRecord
	if _, err := fmt.Sscan(string(data), &r.PID, &r.Start); err != nil || r.PID <= 0 {
		return procRecord{}, fmt.Errorf("%s: want \"PID STARTTIME\", got %q", path, strings.TrimSpace(string(data)))
	}
	return r, nil
}

// alive reports whether the recorded process still runs: same PID, same
// start time.
func (r procRecord) alive() bool {
	start, err := procStart(r.PID)
	return err == nil && start == r.Start
}

// killRecorded kills the process recorded in path if it still runs, waits
// until it is gone, and removes the record.
func killRecorded(path string) (int, bool, error) {
	r, err := readProcRecord(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	killed := false
	if r.alive() {
		if err := syscall.Kill(r.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return r.PID, false, fmt.Errorf("kill leftover process %d recorded in %s: %w", r.PID, path, err)
		}
		killed = true
		// A killed process whose parent is gone is reaped by init at
		// once; wait for that, so its namespaces can go with it.
		for deadline := time.Now().Add(5 * time.Second); r.alive() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return r.PID, killed, err
	}
	return r.PID, killed, nil
}
