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

// A run killed with SIGKILL cannot sweep its namespaces; the next run
// does, and leaves those of a run still going.
func TestARunSweepsTheNamespacesOfAKilledRunAndNotOfALiveOne(t *testing.T) {
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
	write := func(pid int, prefix string) {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pid)), []byte(prefix+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(dead.Process.Pid, killed)
	write(os.Getppid(), live) // the go command: running
	done, err := recordRun(dir, "vpcbench-self-")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + killed + "node"); !os.IsNotExist(err) {
		t.Errorf("the killed run's namespace %snode is still there (%v)", killed, err)
	}
	if _, err := os.Stat("/run/netns/" + live + "node"); err != nil {
		t.Errorf("the live run's namespace was removed: %v", err)
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
