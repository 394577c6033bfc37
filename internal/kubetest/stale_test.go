package kubetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestRemoveStaleDeletesOnlyDirsOfDeadTests(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dirs := []struct {
		name  string
		owner string // "" for no owner file
		kept  bool
	}{
		{dirPattern + "dead", strconv.Itoa(dead.Process.Pid), false},
		{dirPattern + "live", strconv.Itoa(os.Getpid()), true},
		{dirPattern + "starting", "", true},
		{dirPattern + "garbled", "not a pid", true},
		{"someone-else", strconv.Itoa(dead.Process.Pid), true},
	}
	for _, d := range dirs {
		dir := filepath.Join(tmp, d.name)
		if err := os.MkdirAll(filepath.Join(dir, "etcd"), 0o700); err != nil {
			t.Fatal(err)
		}
		if d.owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(d.owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	removeStale(tmp)
	for _, d := range dirs {
		_, err := os.Stat(filepath.Join(tmp, d.name))
		if kept := err == nil; kept != d.kept {
			t.Errorf("%s (owner %q): kept = %v, want %v", d.name, d.owner, kept, d.kept)
		}
	}
}
