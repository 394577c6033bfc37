package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// A run killed with SIGKILL cannot sweep its namespaces or remove its
// scratch directory (gigabytes after a policy run); the next run does,
// and leaves those of a run still going.
func TestARunSweepsTheNamespacesAndScratchOfAKilledRunAndNotOfALiveOne(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("makes network namespaces: needs root")
	}
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	killed := fmt.Sprintf("vpcbench-t%04x-", rand.IntN(1<<16))
	live := fmt.Sprintf("vpcbench-u%04x-", rand.IntN(1<<16))
	for _, ns := range []string{killed + "node", live + "node"} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "delete", ns).Run() })
	}
	scratch := func() string {
		d, err := os.MkdirTemp("", scratchPattern)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.WriteFile(filepath.Join(d, "etcd.db"), []byte("state"), 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	killedScratch, liveScratch := scratch(), scratch()
	write := func(pid int, prefix, scratch string) {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pid)), []byte(prefix+"\n"+scratch+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(dead.Process.Pid, killed, killedScratch)
	write(os.Getppid(), live, liveScratch) // the go command: running
	done, err := recordRun(dir, "vpcbench-self-", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + killed + "node"); !os.IsNotExist(err) {
		t.Errorf("the killed run's namespace %snode is still there (%v)", killed, err)
	}
	if _, err := os.Stat("/run/netns/" + live + "node"); err != nil {
		t.Errorf("the live run's namespace was removed: %v", err)
	}
	if _, err := os.Stat(killedScratch); !os.IsNotExist(err) {
		t.Errorf("the killed run's scratch directory %s is still there (%v)", killedScratch, err)
	}
	if _, err := os.Stat(liveScratch); err != nil {
		t.Errorf("the live run's scratch directory was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(dead.Process.Pid))); !os.IsNotExist(err) {
		t.Errorf("the killed run's record is still there")
	}
	own := filepath.Join(dir, strconv.Itoa(os.Getpid()))
	if _, err := os.Stat(own); err != nil {
		t.Fatalf("this run is not recorded: %v", err)
	}
	done()
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Errorf("this run's record outlived it")
	}
}

// A record names its scratch directory; a path that is not one of the
// driver's own (a hand-edited or corrupt record) is never removed.
func TestOnlyTheDriversOwnScratchDirectoriesAreEverRemoved(t *testing.T) {
	tmp := filepath.Clean(os.TempDir())
	for dir, want := range map[string]bool{
		filepath.Join(tmp, "vpcnet-bench-123"): true,
		filepath.Join(tmp, "vpcnet-bench-"):    true,
		"vpcnet-bench-123":                     false,
		filepath.Join(tmp, "other-123"):        false,
		"/":                                    false,
		tmp:                                    false,
		filepath.Join(tmp, "x", "vpcnet-bench-1"):  false,
		filepath.Join(tmp, "vpcnet-bench-1", ".."): false,
	} {
		if got := isScratch(dir); got != want {
			t.Errorf("isScratch(%q) = %v, want %v", dir, got, want)
		}
	}
}
