package kubetest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	dirPattern = "vpcnet-kubetest-"
	ownerFile  = "owner.pid"
)

// claimDir records the test process owning a cluster directory, so a later
// run can tell the directory was left behind.
func claimDir(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

// removeStale deletes cluster directories whose test process is gone. A
// test binary that panics or hits -timeout takes its servers with it
// (Pdeathsig) but cannot remove its directory, and etcd's preallocated
// files make each one tens of megabytes. Errors are ignored: whatever
// stays is retried next time.
func removeStale(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, dirPattern+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}
