// Package bundle writes a support bundle: one .tar.gz with what a support
// case needs from a node (the agent's view, logs, checkpoint, host
// networking, CNI files, versions), redacted and bounded, with a MANIFEST
// that says for every part whether it was collected or why not. A part
// that cannot be collected (the agent is down, a tool is missing) is
// recorded, never fatal: a bundle is most needed when the node is broken.
package bundle

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"time"
)

// Default limits: a part the size of a busy agent's log tail, and a whole
// bundle that still attaches to a support case.
const (
	DefaultPartLimit  = 16 << 20
	DefaultTotalLimit = 50 << 20
)

// ManifestName is the file in every bundle that lists its parts.
const ManifestName = "MANIFEST"

// Entry is one part of the bundle as the MANIFEST records it.
type Entry struct {
	Name string
	// Err says why the part is missing or partial; nil means collected.
	Err error
	// Size is the bytes stored; Truncated says a limit cut the part.
	Size      int
	Truncated bool
}

// Status is the MANIFEST's word for the entry: "ok", "truncated" or
// "error: MESSAGE".
func (e Entry) Status() string {
	switch {
	case e.Err != nil:
		return "error: " + oneLine(e.Err.Error())
	case e.Truncated:
		return "truncated"
	}
	return "ok"
}

// Archive is a bundle being written. Parts are redacted, cut to the part
// limit, and refused once the total limit is reached (uncompressed bytes,
// so the bound holds however well the parts compress).
type Archive struct {
	tw         *tar.Writer
	gz         *gzip.Writer
	now        time.Time
	partLimit  int
	totalLimit int
	total      int
	entries    []Entry
}

// NewArchive starts a bundle on w. Limits of 0 mean the defaults.
func NewArchive(w io.Writer, now time.Time, partLimit, totalLimit int) *Archive {
	if partLimit <= 0 {
		partLimit = DefaultPartLimit
	}
	if totalLimit <= 0 {
		totalLimit = DefaultTotalLimit
	}
	gz := gzip.NewWriter(w)
	return &Archive{tw: tar.NewWriter(gz), gz: gz, now: now, partLimit: partLimit, totalLimit: totalLimit}
}

// Add stores one part. err is the collection error: the part is recorded
// as failed, and data (what was collected before the error, often the
// command's own message) is still stored when there is any.
func (a *Archive) Add(name string, data []byte, err error) error {
	e := Entry{Name: name, Err: err}
	if len(data) == 0 && err != nil {
		a.entries = append(a.entries, e)
		return nil
	}
	data = Redact(data)
	if len(data) > a.partLimit {
		// Keep the end: the newest log lines, the last of a dump.
		data = data[len(data)-a.partLimit:]
		e.Truncated = true
	}
	if room := a.totalLimit - a.total; len(data) > room {
		if room <= 0 {
			e.Err = fmt.Errorf("left out: the bundle reached its %d MiB limit (raise --max-size)", a.totalLimit>>20)
			a.entries = append(a.entries, e)
			return nil
		}
		data = data[len(data)-room:]
		e.Truncated = true
	}
	e.Size = len(data)
	a.total += len(data)
	a.entries = append(a.entries, e)
	return a.write(name, data)
}

func (a *Archive) write(name string, data []byte) error {
	hdr := &tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: a.now, Typeflag: tar.TypeReg}
	if err := a.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("bundle: write %s: %w", name, err)
	}
	if _, err := a.tw.Write(data); err != nil {
		return fmt.Errorf("bundle: write %s: %w", name, err)
	}
	return nil
}

// Entries are the parts added so far, in order.
func (a *Archive) Entries() []Entry { return append([]Entry(nil), a.entries...) }

// Close writes the MANIFEST and ends the archive.
func (a *Archive) Close() error {
	var b strings.Builder
	fmt.Fprintf(&b, "vpcnet support bundle, %s\n# part\tstatus\tbytes\n", a.now.UTC().Format(time.RFC3339))
	for _, e := range a.entries {
		fmt.Fprintf(&b, "%s\t%s\t%d\n", e.Name, e.Status(), e.Size)
	}
	if err := a.write(ManifestName, []byte(b.String())); err != nil {
		return err
	}
	if err := a.tw.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := a.gz.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\t", " ")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
