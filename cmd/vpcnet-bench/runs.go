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

// runsDir records each running driver's namespace prefix, by PID, so that
// a later run removes what a killed one (SIGKILL: no deferred sweep) left
// and nothing of a run still going. /run empties at boot, as do the
// namespaces.
const runsDir = "/run/vpcnet-bench"

// recordRun sweeps the namespaces of the runs recorded in runsDir whose
// process is gone, then records this one's prefix; the returned func
// removes the record.
func recordRun(runsDir, prefix string) (done func(), err error) {
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
		if p := strings.TrimSpace(string(old)); err == nil && strings.HasPrefix(p, "vpcbench-") {
			if left, serr := fabric.Sweep(p); serr != nil || len(left) > 0 {
				fmt.Fprintf(os.Stderr, "vpcnet-bench: removed %d namespaces a killed run (pid %d) left (%v)\n", len(left), pid, serr)
			}
		}
		os.Remove(path)
	}
	own := filepath.Join(runsDir, strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(own, []byte(prefix+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("record this run's namespaces: %w", err)
	}
	return func() { os.Remove(own) }, nil
}

// alive says whether a process with pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
