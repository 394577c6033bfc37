package simcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestPrefixForIsStablePerDirectoryAndDistinctAcross(t *testing.T) {
	a1, _ := PrefixFor("/run/vpcnet-sim")
	a2, _ := PrefixFor("/run/vpcnet-sim/../vpcnet-sim/")
	b, _ := PrefixFor("/run/vpcnet-sim-b")
	if a1 != a2 {
		t.Errorf("one directory, two prefixes: %q and %q", a1, a2)
	}
	if a1 == b {
		t.Errorf("two directories share the prefix %q", a1)
	}
	for _, p := range []string{a1, b} {
		if !strings.HasPrefix(p, "vpcsim-") || CheckPrefix(p) != nil {
			t.Errorf("prefix %q: want vpcsim-HASH- and a valid prefix (%v)", p, CheckPrefix(p))
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	for p, ok := range map[string]bool{
		"team-a-": true, "vpct1a2b-": true, "": false, "-x": false, "a/b": false,
		"a b": false, strings.Repeat("x", 25): false,
	} {
		if err := CheckPrefix(p); (err == nil) != ok {
			t.Errorf("CheckPrefix(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

// The state directory's lock tells whether its owner lives, and who it
// is; a second owner is refused.
func TestLockStateOwnsTheDirectoryUntilReleased(t *testing.T) {
	dir := t.TempDir()
	if _, held, err := LockHolder(dir); held || err != nil {
		t.Fatalf("fresh directory: held %v, err %v", held, err)
	}
	release, err := LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	pid, held, err := LockHolder(dir)
	if !held || pid != os.Getpid() || err != nil {
		t.Errorf("locked: pid %d held %v err %v; want this process", pid, held, err)
	}
	if _, err := LockState(dir); err == nil || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Errorf("second LockState = %v; want a refusal naming pid %d", err, os.Getpid())
	}
	release()
	if _, held, _ := LockHolder(dir); held {
		t.Error("still held after release")
	}
}

// Concurrent writers (the owner's fabric, `sim pod add` in another
// process) append whole lines.
func TestRecordedNamespacesKeepsEveryConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if err := recordNamespace(dir, fmt.Sprintf("vpcsim-test-pod-%02d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	names, err := recordedNamespaces(dir)
	if err != nil || len(names) != 50 {
		t.Fatalf("%d names, err %v", len(names), err)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] || !strings.HasPrefix(n, "vpcsim-test-pod-") || len(n) != len("vpcsim-test-pod-00") {
			t.Errorf("bad or repeated line %q", n)
		}
		seen[n] = true
	}
}

// A process record matches only the process it was written for, so a
// reused PID is never killed.
func TestProcRecordRecognisesOnlyTheSameProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pid")
	if err := writeProcRecord(path, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	r, err := readProcRecord(path)
	if err != nil || r.PID != os.Getpid() || !r.alive() {
		t.Fatalf("record %+v, err %v: want this process, alive", r, err)
	}
	r.Start++ // what a new process with the same PID would look like
	if r.alive() {
		t.Error("a record with another start time counts as alive")
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readProcRecord(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("garbage record: %v, want an error naming the file", err)
	}
}
