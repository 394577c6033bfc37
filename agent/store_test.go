package agent

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/config"
)

// gatedDisk stands in for the node's disk: each checkpoint write
// announces itself on entered and returns only what the test sends on
// answer, so a test holds the disk mid-write for as long as it likes
// without sleeping.
type gatedDisk struct {
	entered chan savedWrite
	answer  chan error
	// gone ends a write the test no longer answers (it failed early).
	gone chan struct{}
}

var _ Disk = (*gatedDisk)(nil)

type savedWrite struct {
	path  string
	state checkpoint.State
}

func (d *gatedDisk) Load(path string) (checkpoint.State, error) {
	return checkpoint.State{}, fs.ErrNotExist
}

func (d *gatedDisk) InstallConf(string, string, cniconf.Options) error { return nil }
func (d *gatedDisk) ReadFile(path string) ([]byte, error) {
	return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
}
func (d *gatedDisk) WriteFile(string, []byte) error { return nil }

func (d *gatedDisk) Save(path string, s checkpoint.State) error {
	select {
	case d.entered <- savedWrite{path: path, state: s}:
	case <-d.gone:
		return errors.New("test over")
	}
	select {
	case err := <-d.answer:
		return err
	case <-d.gone:
		return errors.New("test over")
	}
}

// storeUnderTest is an agent whose checkpoint writes go to a gated disk
// and run as vpcnetd runs them (its own Effects); the owner's side is
// a.events, read by the test. It returns a function that hands the
// agent's store one write, as the owner does with Ready's Persist.
func storeUnderTest(t *testing.T) (*Agent, *gatedDisk, func(nodestate.Persist)) {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Load(func(k string) (string, bool) {
		if k == "VPCNET_STATE_DIR" {
			return dir, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &gatedDisk{entered: make(chan savedWrite), answer: make(chan error), gone: make(chan struct{})}
	// The store never calls EC2 or the host; New only insists they exist.
	a, err := New(Options{Config: cfg, Cloud: (*cloud.Client)(nil), Host: newFakeHost(), Disk: d})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); close(d.gone); a.writes.Wait() })
	return a, d, func(p nodestate.Persist) { a.fx.Go(ctx, a.write(p)) }
}

// persisted is the next event the store sends the owner. The deadline
// only bounds a broken store; nothing waits on it to order events.
func persisted(t *testing.T, a *Agent) nodestate.Persisted {
	t.Helper()
	select {
	case ev := <-a.events:
		p, ok := ev.(nodestate.Persisted)
		if !ok {
			t.Fatalf("the store sent %T, want nodestate.Persisted", ev)
		}
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("the store never reported the write")
	}
	return nodestate.Persisted{}
}

// heldWrite hands the store version v of a one-entry checkpoint and
// returns once the disk is writing it, checking the store saves what the
// owner asked for, where the configuration says.
func heldWrite(t *testing.T, a *Agent, d *gatedDisk, store func(nodestate.Persist), v uint64) {
	t.Helper()
	st := checkpoint.State{Entries: []checkpoint.Entry{{
		Key: key(int(v)), Pod: pod(int(v)), Addr: netip.MustParseAddr("10.0.0.9"), AssignedAt: time.Unix(1, 0).UTC(),
	}}}
	store(nodestate.Persist{Version: v, State: st})
	w := <-d.entered
	if w.path != a.cfg.CheckpointPath() || len(w.state.Entries) != 1 || w.state.Entries[0].Key != key(int(v)) {
		t.Fatalf("the store wrote %d entries to %s, want version %d's one entry at %s", len(w.state.Entries), w.path, v, a.cfg.CheckpointPath())
	}
	// The send of an early report, if any, came before the write began:
	// it is in the buffered channel now.
	select {
	case ev := <-a.events:
		t.Fatalf("the store reported %+v while the disk was still writing: replies waiting for it would leave before their entry is on disk", ev)
	default:
	}
}

func TestStoreReportsAWriteDoneOnlyAfterTheDiskReturned(t *testing.T) {
	a, d, store := storeUnderTest(t)
	heldWrite(t, a, d, store, 7)
	d.answer <- nil
	if got := persisted(t, a); got.Version != 7 || got.Err != nil {
		t.Fatalf("after the disk returned, the store reported %+v, want version 7 without error", got)
	}
}

func TestStorePassesAFailedWriteToTheOwner(t *testing.T) {
	a, d, store := storeUnderTest(t)
	full := errors.New("write checkpoint: no space left on device")
	heldWrite(t, a, d, store, 3)
	d.answer <- full
	got := persisted(t, a)
	if got.Version != 3 || !errors.Is(got.Err, full) {
		t.Fatalf("after a failed write, the store reported %+v, want version 3 failing with %q: the owner would answer Adds the disk does not hold", got, full)
	}
	if n := testutil.ToFloat64(a.met.checkpointErrors); n != 1 {
		t.Fatalf("vpcnet checkpoint write errors = %v after one failed write, want 1", n)
	}
	// The next write after a failure is written and reported as usual.
	heldWrite(t, a, d, store, 4)
	d.answer <- nil
	if got := persisted(t, a); got.Version != 4 || got.Err != nil {
		t.Fatalf("the write after a failure was reported as %+v, want version 4 without error", got)
	}
}
