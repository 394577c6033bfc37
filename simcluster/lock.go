package simcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lockFile is held (flock) by the process that owns a cluster for as long
// as it lives, and holds that process's ID. The kernel drops the lock when
// the process dies however it dies, so "is the owner still running?" has
// a true answer without trusting a PID that may have been reused. The
// descriptor is close-on-exec, so the agents never hold it.
const lockFile = "run.lock"

// LockState makes this process the owner of the cluster in stateDir, or
// says who is. release gives the lock up.
func LockState(stateDir string) (release func(), err error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(stateDir, lockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the state directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid, _ := readLockPID(path)
			return nil, fmt.Errorf("a local cloud (pid %d) already runs with state in %s", pid, stateDir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// LockHolder reports whether a live process owns the cluster in stateDir,
// and its process ID.
func LockHolder(stateDir string) (pid int, held bool, err error) {
	path := filepath.Join(stateDir, lockFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); {
	case err == nil:
		return 0, false, nil // closing f releases the probe's lock
	case errors.Is(err, unix.EWOULDBLOCK):
		// The owner writes its PID right after it takes the lock; give
		// it that moment rather than fail on an empty file.
		pid, err := readLockPID(path)
		for deadline := time.Now().Add(time.Second); err != nil && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			pid, err = readLockPID(path)
		}
		return pid, true, err
	default:
		return 0, false, fmt.Errorf("probe %s: %w", path, err)
	}
}

func readLockPID(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s holds %q, not a process ID", path, strings.TrimSpace(string(data)))
	}
	return pid, nil
}
