package kubecluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vpcnet/vpcnet/simcluster"
)

// cgroupMount is where the host's cgroup hierarchies are mounted: on these
// machines one directory per cgroup v1 controller plus an empty cgroup2
// mount (unified) beside them.
const cgroupMount = "/sys/fs/cgroup"

// hierarchies lists the directories of every mounted cgroup hierarchy
// (v1 and v2) under cgroupMount.
func hierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// mountinfo: ... mount-point ... - fstype source options
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		typ, point := fields[sep+1], fields[4]
		if (typ == "cgroup" || typ == "cgroup2") && strings.HasPrefix(point, cgroupMount+"/") {
			out = append(out, point)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cgroup hierarchy is mounted under %s", cgroupMount)
	}
	return out, nil
}

// makeCgroup creates rel (such as /vpcnet-x-i-node1/system) in every
// hierarchy, as the kubelet's cgroupfs driver expects its cgroupRoot to
// exist in each; a new cpuset cgroup gets its parent's CPUs and memory
// nodes, which cgroup v1 leaves empty (and then refuses every task).
func makeCgroup(hs []string, rel string) error {
	for _, h := range hs {
		parts := strings.Split(strings.Trim(rel, "/"), "/")
		dir := h
		for _, p := range parts {
			parent := dir
			dir = filepath.Join(dir, p)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			if filepath.Base(h) == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(parent, f))
					if err != nil {
						return err
					}
					cur, _ := os.ReadFile(filepath.Join(dir, f))
					if strings.TrimSpace(string(cur)) != "" {
						continue
					}
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return fmt.Errorf("copy %s into %s: %w", f, dir, err)
					}
				}
			}
		}
	}
	return nil
}

// cgroupPIDs lists every process in rel or below it, in any hierarchy.
func cgroupPIDs(hs []string, rel string) []int {
	seen := map[int]bool{}
	var out []int
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, rel), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// killCgroup sends SIGKILL to every process in rel's subtree: processes
// found by PID in the node's own cgroup, so nothing outside it is touched.
// It reports how many it signalled.
func killCgroup(hs []string, rel string) int {
	pids := cgroupPIDs(hs, rel)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(pids)
}

// removeCgroup removes rel and everything the kubelet and runc made below
// it, deepest first, in every hierarchy. Cgroups with processes left fail
// with EBUSY, reported.
func removeCgroup(hs []string, rel string) error {
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, rel)
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

const sigterm = syscall.SIGTERM

func syscallKill(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// cgroupsFile, in the cluster's state directory, lists every cgroup the
// cluster made (one path a line, relative to each hierarchy), written
// before any process joins it: if the process running the cluster is
// killed, RemoveLeftovers still finds every process it started, by PID,
// in those cgroups, and nothing else.
const cgroupsFile = "kube-cgroups"

func recordCgroup(stateDir, rel string) error {
	f, err := os.OpenFile(filepath.Join(stateDir, cgroupsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, rel)
	return err
}

// Leftovers is what RemoveLeftovers found and removed.
type Leftovers struct {
	Killed  int      // processes
	Cgroups []string // cgroups removed
}

// FreshStateDir makes stateDir empty for a new cluster, after removing
// what a killed earlier cluster with that state directory left: its
// processes and cgroups (RemoveLeftovers), its namespaces and agents
// (simcluster.RemoveRecorded).
func FreshStateDir(stateDir string) error {
	if _, err := RemoveLeftovers(stateDir); err != nil {
		return err
	}
	if _, err := simcluster.RemoveRecorded(stateDir); err != nil {
		return err
	}
	if err := os.RemoveAll(stateDir); err != nil {
		return err
	}
	return os.MkdirAll(stateDir, 0o700)
}

// RemoveLeftovers kills every process in the cgroups a cluster with state
// in stateDir recorded and removes those cgroups: what a killed `sim run`
// or test left (containerd, kubelets, kube-proxy, containers, the control
// plane). It is a no-op when nothing was recorded.
func RemoveLeftovers(stateDir string) (Leftovers, error) {
	var left Leftovers
	data, err := os.ReadFile(filepath.Join(stateDir, cgroupsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return left, nil
	}
	if err != nil {
		return left, err
	}
	hs, err := hierarchies()
	if err != nil {
		return left, err
	}
	var errs []error
	for _, rel := range strings.Fields(string(data)) {
		if !strings.HasPrefix(rel, "/") || strings.Contains(rel, "..") {
			continue
		}
		exists := false
		for _, h := range hs {
			if _, err := os.Stat(filepath.Join(h, rel)); err == nil {
				exists = true
			}
		}
		if !exists {
			continue
		}
		for i := 0; i < 50; i++ {
			n := killCgroup(hs, rel)
			left.Killed += n
			if n == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := removeCgroup(hs, rel); err != nil {
			errs = append(errs, err)
			continue
		}
		left.Cgroups = append(left.Cgroups, rel)
	}
	if len(errs) == 0 {
		_ = os.Remove(filepath.Join(stateDir, cgroupsFile))
	}
	return left, errors.Join(errs...)
}

// joinCgroup moves pid into rel in every hierarchy.
func joinCgroup(hs []string, rel string, pid int) error {
	for _, h := range hs {
		if err := os.WriteFile(filepath.Join(h, rel, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move process %d into cgroup %s: %w", pid, filepath.Join(h, rel), err)
		}
	}
	return nil
}
