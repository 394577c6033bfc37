package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vpcnet/vpcnet/internal/atomicfile"
)

// installer copies plugins from the image's directory to the node's.
type installer struct {
	from string // the image's plugins
	to   string // the node's CNI binary directory
	log  io.Writer
}

// replace installs the image's copy of name over the node's, unless the
// node's is already the same file.
func (in installer) replace(name string) error {
	src := filepath.Join(in.from, name)
	dst := filepath.Join(in.to, name)
	same, err := sameContent(src, dst)
	if err != nil {
		return err
	}
	if same {
		fmt.Fprintf(in.log, "%s is up to date\n", dst)
		return nil
	}
	if err := copyAtomic(src, dst); err != nil {
		return err
	}
	fmt.Fprintf(in.log, "installed %s\n", dst)
	return nil
}

// ensure makes sure the node has name, installing the image's copy only
// when the node has none: the node's own reference plugins are its
// operator's to upgrade.
func (in installer) ensure(name string) error {
	dst := filepath.Join(in.to, name)
	// Lstat: a symlink's target is a host path this container may not
	// see, so the node's link is trusted, not followed.
	st, err := os.Lstat(dst)
	switch {
	case err == nil && (st.Mode().IsRegular() || st.Mode()&fs.ModeSymlink != 0):
		fmt.Fprintf(in.log, "keeping the node's %s\n", dst)
		return nil
	case err == nil:
		return fmt.Errorf("%s is not a regular file; remove it so the plugin can be installed", dst)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("check %s: %w", dst, err)
	}
	src := filepath.Join(in.from, name)
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the node has no CNI plugin %q in %s and this image carries none; the CNI configuration vpcnetd writes chains it, "+
			"so install the CNI reference plugins on the node (https://github.com/containernetworking/plugins/releases) "+
			"or use the image built from vpcnet's Dockerfile, which carries it", name, in.to)
	}
	if err := copyAtomic(src, dst); err != nil {
		return err
	}
	fmt.Fprintf(in.log, "installed %s (the node had none)\n", dst)
	return nil
}

// sameContent reports whether dst exists, is executable and has the bytes
// of src. A missing src is an error; a missing dst is not.
func sameContent(src, dst string) (bool, error) {
	want, err := digest(src)
	if err != nil {
		return false, fmt.Errorf("read plugin to install: %w", err)
	}
	st, err := os.Stat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check %s: %w", dst, err)
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("%s is not a regular file; remove it so the plugin can be installed", dst)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return false, nil
	}
	got, err := digest(dst)
	if err != nil {
		return false, fmt.Errorf("check %s: %w", dst, err)
	}
	return bytes.Equal(got, want), nil
}

func digest(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return h.Sum(nil), nil
}

// copyAtomic streams src into a temporary file beside dst, makes it
// executable, fsyncs it and renames it over dst. Streaming keeps the init
// container's memory small whatever the binary's size.
func copyAtomic(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("read plugin to install: %w", err)
	}
	defer in.Close()
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("install %s: %w (is the node's CNI binary directory mounted writable?)", dst, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, in); err != nil {
		return fmt.Errorf("install %s: copy %s: %w", dst, src, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("install %s: fsync: %w", dst, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	return atomicfile.SyncDir(dir)
}
