package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/vpcnet/vpcnet/fabric"
)

// runsDir records each running driver's namespace prefix and scratch
// directory, by PID, so that a later run removes what a killed one
// (SIGKILL: no deferred sweep) left and nothing of a run still going. A
// policy run's scratch holds its clusters' state and grows to gigabytes,
// so a killed run's must not wait for a reboot. /run empties at boot, as
// do the namespaces.
const runsDir = "/run/vpcnet-bench"

// recordRun sweeps the namespaces and scratch directories of the runs
// recorded in runsDir whose process is gone, then records this one's
// prefix and scratch; the returned func removes the record.
func recordRun(runsDir, prefix, scratch string) (done func(), err error) {
	if err := os.MkdirAll(runsDir, 0o700); err != nil {
		return nil, fmt.Errorf("record this run's namespaces: %w", err)
	}
	ents, err := os.ReadDir(runsDir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", runsDir, err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || alive(pid) {
			continue
		}
		path := filepath.Join(runsDir, e.Name())
		old, err := os.ReadFile(path)
		if err == nil {
			sweepKilled(pid, strings.Fields(string(old)))
		}
		os.Remove(path)
	}
	own := filepath.Join(runsDir, strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(own, []byte(prefix+"\n"+scratch+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("record this run's namespaces: %w", err)
	}
	return func() { os.Remove(own) }, nil
}

// sweepKilled removes what the record of a killed run names: its
// namespaces by prefix, and its scratch directory if it is one of ours
// (a record is only ever written by this program, but a path from a file
// is checked before a recursive remove all the same).
func sweepKilled(pid int, record []string) {
	if len(record) > 0 && strings.HasPrefix(record[0], "vpcbench-") {
		if left, serr := fabric.Sweep(record[0]); serr != nil || len(left) > 0 {
			fmt.Fprintf(os.Stderr, "vpcnet-bench: removed %d namespaces a killed run (pid %d) left (%v)\n", len(left), pid, serr)
		}
	}
	if len(record) > 1 && isScratch(record[1]) {
		if err := os.RemoveAll(record[1]); err != nil {
			fmt.Fprintf(os.Stderr, "vpcnet-bench: removing %s, which a killed run (pid %d) left: %v\n", record[1], pid, err)
		} else {
			fmt.Fprintf(os.Stderr, "vpcnet-bench: removed %s, which a killed run (pid %d) left\n", record[1], pid)
		}
	}
}

// isScratch says whether dir is a scratch directory as run makes them.
func isScratch(dir string) bool {
	return filepath.IsAbs(dir) && filepath.Dir(dir) == filepath.Clean(os.TempDir()) && strings.HasPrefix(filepath.Base(dir), scratchPattern[:len(scratchPattern)-1])
}

// scratchPattern names each run's scratch directory (os.MkdirTemp).
const scratchPattern = "vpcnet-bench-*"

// alive says whether a process with pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
