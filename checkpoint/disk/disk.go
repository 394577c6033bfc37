// Package disk keeps the checkpoint in a file: Save replaces it
// atomically and durably, Load reads it back and refuses a file it cannot
// trust.
//
// A file that fails to decode is left exactly where it is, and a copy is
// kept beside it as <path>.corrupt-<hash of its content>. It is not
// renamed away: a missing checkpoint means "fresh node, nobody holds
// anything", so after a rename the next start (kubelet restarts the agent
// within seconds) would find no file, believe every address free, and
// hand addresses of live pods to new ones. Leaving the bad file in place
// keeps the agent refusing to start until an operator repairs or removes
// it, and the copy keeps the evidence even once they do. Naming the copy
// by content rather than by time needs no clock and makes a crash loop
// keep one copy, not one per restart.
package disk

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/internal/atomicfile"
)

// CorruptError is Load's error for a file that exists but does not decode
// (truncated, corrupt, or of an unknown version) or decodes to a state
// that cannot be written back.
type CorruptError struct {
	// Path is the checkpoint, left untouched.
	Path string
	// Copy is where its content was copied; empty if copying failed.
	Copy string
	// CopyErr says why no copy was kept, if none was.
	CopyErr error
	// Err is the decoding error, naming what is wrong and where.
	Err error
}

func (e *CorruptError) Error() string {
	kept := "copied to " + e.Copy
	if e.Copy == "" {
		kept = fmt.Sprintf("not copied (%v)", e.CopyErr)
	}
	return fmt.Sprintf("checkpoint %s cannot be trusted: %v; the file is left untouched and %s; "+
		"repair it, or remove it to start afresh (the node then forgets which pod holds which address)",
		e.Path, e.Err, kept)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Load reads the checkpoint at path, in either format checkpoint.Decode
// reads. A missing file gives an error matching fs.ErrNotExist; a file that
// does not decode gives a *CorruptError and is never modified.
func Load(path string) (checkpoint.State, error) {
	f, err := os.Open(path)
	if err != nil {
		return checkpoint.State{}, fmt.Errorf("load checkpoint: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return checkpoint.State{}, fmt.Errorf("load checkpoint: %w", err)
	}
	if !info.Mode().IsRegular() {
		return checkpoint.State{}, fmt.Errorf("load checkpoint: %s is a %s, not a file", path, info.Mode().Type())
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return checkpoint.State{}, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	s, err := checkpoint.Decode(data)
	if err == nil {
		// The agent writes the checkpoint back right after loading it. A
		// state that loads but cannot be saved would stop it at that save,
		// at every start, with the file neither named corrupt nor copied;
		// the codec promises this cannot happen, and this keeps the
		// promise's failure on the corrupt path.
		if _, encErr := checkpoint.Encode(s); encErr != nil {
			err = fmt.Errorf("decodes but cannot be written back: %w", encErr)
		}
	}
	if err != nil {
		copyPath, copyErr := keepCopy(path, data, info)
		return checkpoint.State{}, &CorruptError{Path: path, Copy: copyPath, CopyErr: copyErr, Err: err}
	}
	return s, nil
}

// keepCopy writes data, the bytes Load judged, beside path with the
// original's modification time, so the copy shows when the bad file was
// written.
func keepCopy(path string, data []byte, orig os.FileInfo) (string, error) {
	sum := sha256.Sum256(data)
	name := path + ".corrupt-" + hex.EncodeToString(sum[:6])
	if have, err := os.ReadFile(name); err == nil && string(have) == string(data) {
		return name, nil
	}
	if err := atomicfile.Write(name, data, 0o600); err != nil {
		return "", err
	}
	// The copy exists; a wrong timestamp on it is not worth failing over.
	_ = os.Chtimes(name, orig.ModTime(), orig.ModTime())
	return name, nil
}

// Save replaces the checkpoint at path with s. When it returns nil the new
// state is on disk and survives a crash or power loss; at any instant the
// file holds either the old state or the new one, never a mix. The
// directory must exist. Calls for one path must not overlap: the caller
// serialises them, as it orders the states.
func Save(path string, s checkpoint.State) error {
	data, err := checkpoint.Encode(s)
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", path, err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}
