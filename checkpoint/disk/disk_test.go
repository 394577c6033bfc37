package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

func state(n int) checkpoint.State {
	var s checkpoint.State
	for i := range n {
		s.Entries = append(s.Entries, checkpoint.Entry{
			Key:        ipam.Key{Network: "vpcnet", ContainerID: fmt.Sprintf("%064x", i), IfName: "eth0"},
			Addr:       netip.AddrFrom4([4]byte{10, 2, byte(i / 200), byte(1 + i%200)}),
			Pod:        ipam.Pod{Namespace: "default", Name: fmt.Sprintf("web-%d", i)},
			AssignedAt: time.Date(2026, 2, 3, 4, 5, 6, i, time.UTC),
		})
	}
	return s
}

// dirNames lists the names in dir, to catch stray temporary files.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestSaveThenLoadGivesTheSameState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	for _, n := range []int{3, 0, 250} {
		want := state(n)
		if err := Save(path, want); err != nil {
			t.Fatal(err)
		}
		got, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Entries) != n {
			t.Fatalf("Load after saving %d entries gave %d", n, len(got.Entries))
		}
		for i := range got.Entries {
			if got.Entries[i].Key != want.Entries[i].Key || got.Entries[i].Addr != want.Entries[i].Addr {
				t.Fatalf("entry %d = %+v, want %+v", i, got.Entries[i], want.Entries[i])
			}
		}
	}
	if names := dirNames(t, filepath.Dir(path)); len(names) != 1 {
		t.Errorf("directory holds %v, want only checkpoint.json", names)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("checkpoint mode = %v, want 0600: it lists the node's pods", perm)
	}
}

func TestLoadMissingFileIsNotExist(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "checkpoint.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file = %v, want an error matching fs.ErrNotExist", err)
	}
	var corrupt *CorruptError
	if errors.As(err, &corrupt) {
		t.Errorf("a missing file was reported corrupt: %v", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("Load of a missing file created %v", names)
	}
}

func TestLoadKeepsACorruptFileInPlaceAndCopiesIt(t *testing.T) {
	valid, err := checkpoint.Encode(state(3))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", valid[:len(valid)/2], "truncated"},
		{"empty", nil, "empty input"},
		{"garbage", []byte("\x00\x01not json"), "invalid JSON at line 1, column 1"},
		{"unknown version", []byte(`{"version":"vpcnet/9","assignments":[]}`), `unknown version "vpcnet/9"`},
		{"address twice", []byte(`{"version":"vpcnet/1","assignments":[
{"network":"n","containerID":"a","ifName":"eth0","address":"10.0.0.1","assignedAt":"2026-01-01T00:00:00Z"},
{"network":"n","containerID":"b","ifName":"eth0","address":"10.0.0.1","assignedAt":"2026-01-01T00:00:00Z"}]}`),
			"address 10.0.0.1 is held by two owners"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "checkpoint.json")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			written := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			if err := os.Chtimes(path, written, written); err != nil {
				t.Fatal(err)
			}

			_, err := Load(path)
			var corrupt *CorruptError
			if !errors.As(err, &corrupt) {
				t.Fatalf("Load = %v, want a *CorruptError", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file and %q", err, tt.want)
			}
			if errors.Is(err, fs.ErrNotExist) {
				t.Error("a corrupt file matches fs.ErrNotExist; the agent would start afresh")
			}

			if got, _ := os.ReadFile(path); string(got) != string(tt.data) {
				t.Errorf("the corrupt file was changed to %q", got)
			}
			if corrupt.Copy == "" || !strings.Contains(err.Error(), corrupt.Copy) {
				t.Fatalf("no copy named in %v", err)
			}
			if got, _ := os.ReadFile(corrupt.Copy); string(got) != string(tt.data) {
				t.Errorf("the copy holds %q, want the corrupt bytes", got)
			}
			if info, err := os.Stat(corrupt.Copy); err != nil || !info.ModTime().Equal(written) {
				t.Errorf("the copy's time = %v (%v), want the original's %v", info.ModTime(), err, written)
			}

			// Kubelet restarts a failing agent: it must keep refusing, and
			// keep one copy rather than one per restart.
			if _, err := Load(path); !errors.As(err, &corrupt) {
				t.Fatalf("second Load = %v, want a *CorruptError again", err)
			}
			if names := dirNames(t, dir); len(names) != 2 {
				t.Errorf("after two loads the directory holds %v, want the file and one copy", names)
			}
		})
	}
}

func TestLoadReportsWhenTheCopyCannotBeKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var corrupt *CorruptError
	if !errors.As(err, &corrupt) {
		t.Fatal(err)
	}
	// A directory where the copy should go makes the copy fail, even as root.
	if err := os.Remove(corrupt.Copy); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(corrupt.Copy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corrupt.Copy, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if !errors.As(err, &corrupt) || corrupt.Copy != "" || corrupt.CopyErr == nil {
		t.Fatalf("Load = %v, want a *CorruptError saying no copy was kept", err)
	}
	if !strings.Contains(err.Error(), "not copied") {
		t.Errorf("error %q does not say the copy failed", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "{" {
		t.Errorf("the corrupt file was changed to %q", got)
	}
}

func TestLoadReadsTheAmazonVPCCNICheckpoint(t *testing.T) {
	s, err := Load("../testdata/aws-node-ipam.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Entries) != 3 {
		t.Errorf("Load gave %d entries, want the 3 of the Amazon VPC CNI file", len(s.Entries))
	}
}

func TestLoadOfADirectoryIsNotCorruption(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	var corrupt *CorruptError
	if err == nil || errors.As(err, &corrupt) {
		t.Fatalf("Load(directory) = %v, want a plain error", err)
	}
	if !strings.Contains(err.Error(), "not a file") {
		t.Errorf("error %q does not say the path is not a file", err)
	}
}

func TestSaveOfAnInvalidStateKeepsTheOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	if err := Save(path, state(2)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	bad := state(2)
	bad.Entries[1].Addr = bad.Entries[0].Addr
	err := Save(path, bad)
	if err == nil || !strings.Contains(err.Error(), "held by two owners") {
		t.Fatalf("Save of an address held twice = %v, want a refusal", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("a refused Save changed the file")
	}
	if names := dirNames(t, filepath.Dir(path)); len(names) != 1 {
		t.Errorf("directory holds %v, want only checkpoint.json", names)
	}
}

func TestSaveIntoAMissingDirectoryFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent", "checkpoint.json")
	err := Save(path, state(1))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Save into a missing directory = %v, want fs.ErrNotExist", err)
	}
}

func BenchmarkSave250(b *testing.B) {
	path := filepath.Join(b.TempDir(), "checkpoint.json")
	s := state(250)
	b.ReportAllocs()
	for b.Loop() {
		if err := Save(path, s); err != nil {
			b.Fatal(err)
		}
	}
}

// A file that decodes but holds what the codec cannot write back used to
// load, and the agent then failed at its first save and exited at every
// start. It must take the corrupt path: refused, left in place, copied.
func TestLoadKeepsAsideAFileThatDecodesButCannotBeWrittenBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	data := []byte(`{"version":"vpcnet/1","assignments":[
{"network":"n","containerID":"a","ifName":"eth0","address":"10.0.0.1","assignedAt":"0000-01-01T00:00:00+01:00"}]}`)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	var corrupt *CorruptError
	if !errors.As(err, &corrupt) {
		t.Fatalf("Load = %+v, %v; want a *CorruptError (Save then says: %v)", s, err, Save(filepath.Join(dir, "resave.json"), s))
	}
	if !strings.Contains(err.Error(), "assignments[0]: assignedAt") {
		t.Errorf("error %q does not name the entry and field", err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(data) {
		t.Errorf("the file was changed to %q", got)
	}
	if got, _ := os.ReadFile(corrupt.Copy); string(got) != string(data) {
		t.Errorf("the copy %q holds %q, want the file's bytes", corrupt.Copy, got)
	}
}
