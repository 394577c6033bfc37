package agent

import (
	"io/fs"
	"slices"
)

// MemFiles keeps a Disk's state files other than the checkpoint (its
// ReadFile and WriteFile: the preflight record) in memory, every write
// landing at once, for the worlds that swap the node's disk (the
// simulation, the scale driver). The zero value holds no file.
type MemFiles struct {
	files map[string][]byte
}

// ReadFile returns a copy of path's bytes, or an fs.ErrNotExist error.
func (m *MemFiles) ReadFile(path string) ([]byte, error) {
	b, ok := m.files[path]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return slices.Clone(b), nil
}

// WriteFile replaces path's bytes by a copy of data.
func (m *MemFiles) WriteFile(path string, data []byte) error {
	if m.files == nil {
		m.files = map[string][]byte{}
	}
	m.files[path] = slices.Clone(data)
	return nil
}
