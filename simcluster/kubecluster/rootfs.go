package kubecluster

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// rootfs is an image's file tree, built in memory from this machine's
// files and written as one layer. The images Kubernetes' e2e tests run
// need real tools (a shell, dig, curl, nc, ip, nft): there is no registry
// to pull them from, so they come from Debian's packages installed on this
// machine, each program with the shared libraries it loads (its ELF
// closure), as a distroless image carries them.
type rootfs struct {
	entries map[string]rootfsEntry // by path without the leading slash
}

type rootfsEntry struct {
	typ  byte // tar.TypeDir, TypeReg or TypeSymlink
	mode int64
	data []byte
	link string
}

func newRootfs() *rootfs {
	r := &rootfs{entries: map[string]rootfsEntry{}}
	r.dir("/tmp", 0o1777)
	return r
}

func clean(p string) string { return strings.TrimPrefix(filepath.Clean("/"+p), "/") }

// dir adds a directory and its parents.
func (r *rootfs) dir(p string, mode int64) {
	p = clean(p)
	if p == "" {
		return
	}
	r.parents(p)
	if e, ok := r.entries[p]; ok && e.typ == tar.TypeDir {
		return
	}
	r.entries[p] = rootfsEntry{typ: tar.TypeDir, mode: mode}
}

func (r *rootfs) parents(p string) {
	if d := filepath.Dir(p); d != "." && d != "/" {
		r.dir(d, 0o755)
	}
}

// file adds (or replaces) a regular file.
func (r *rootfs) file(p string, mode int64, data []byte) {
	p = clean(p)
	r.parents(p)
	r.entries[p] = rootfsEntry{typ: tar.TypeReg, mode: mode, data: data}
}

// symlink adds (or replaces) a symbolic link at p pointing to target.
func (r *rootfs) symlink(p, target string) {
	p = clean(p)
	r.parents(p)
	r.entries[p] = rootfsEntry{typ: tar.TypeSymlink, mode: 0o777, link: target}
}

// copyFile adds the host file src at dst (src's mode kept).
func (r *rootfs) copyFile(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	r.file(dst, int64(st.Mode().Perm()), data)
	return nil
}

// libDirs are where Debian's dynamic loader finds shared libraries on
// amd64, in its search order.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"}

// program adds the host executable at path (at the same path in the
// image) with every shared library it needs, transitively, and the
// dynamic loader; a missing program names the Debian package to install.
func (r *rootfs) program(path, debianPackage string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s not found (apt-get install %s): %w", path, debianPackage, err)
	}
	seen := map[string]bool{}
	return r.elfClosure(path, seen)
}

// elfClosure copies the file at path, following symbolic links (each link
// kept as a link, as the image's loader and programs expect the names),
// then the libraries it names in DT_NEEDED and its interpreter.
func (r *rootfs) elfClosure(path string, seen map[string]bool) error {
	if seen[path] {
		return nil
	}
	seen[path] = true
	real := path
	for i := 0; i < 16; i++ {
		st, err := os.Lstat(real)
		if err != nil {
			return err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(real)
		if err != nil {
			return err
		}
		r.symlink(real, target)
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(real), target)
		}
		real = target
	}
	if err := r.copyFile(real, real); err != nil {
		return err
	}
	f, err := elf.Open(real)
	if err != nil {
		return nil // a script or data file: nothing to follow
	}
	defer f.Close()
	var deps []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return fmt.Errorf("%s: interpreter: %w", real, err)
			}
			deps = append(deps, strings.TrimRight(string(b), "\x00"))
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: %w", real, err)
	}
	for _, lib := range needed {
		found := ""
		for _, d := range libDirs {
			if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
				found = filepath.Join(d, lib)
				break
			}
		}
		if found == "" {
			return fmt.Errorf("%s needs %s, which is in none of %v", real, lib, libDirs)
		}
		deps = append(deps, found)
	}
	for _, d := range deps {
		if err := r.elfClosure(d, seen); err != nil {
			return err
		}
	}
	return nil
}

// layer writes the tree as one uncompressed tar layer, in path order so
// the same tree gives the same layer digest.
func (r *rootfs) layer() (v1.Layer, error) {
	paths := make([]string, 0, len(r.entries))
	for p := range r.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := r.entries[p]
		h := &tar.Header{Typeflag: e.typ, Name: p, Mode: e.mode, Linkname: e.link}
		switch e.typ {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeReg:
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// imageConfig is what an image's config says besides its layers.
type imageConfig struct {
	Entrypoint, Cmd []string
	User            string
	WorkingDir      string
}

// image is the tree as a one-layer linux/amd64 image.
func (r *rootfs) image(c imageConfig) (v1.Image, error) {
	layer, err := r.layer()
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint, cfg.Config.Cmd = c.Entrypoint, c.Cmd
	cfg.Config.User, cfg.Config.WorkingDir = c.User, c.WorkingDir
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return mutate.ConfigFile(img, cfg)
}

// busybox adds Debian's busybox-static and a link for every applet whose
// name no program in the image has yet, in any directory: the core
// utilities (cat, seq, sleep, test, wget, nslookup, hostname, ...) the
// tests' commands use, never shadowing a real program (busybox's ip is
// in /sbin, before iproute2's /bin/ip on PATH). The shell is Debian's
// dash, not busybox's: Debian builds busybox-static with its "standalone
// shell", whose ash runs its own applets before anything on PATH, so
// `nc -v` in a test's script would reach busybox's nc, which has no -v.
func (r *rootfs) busybox() error {
	const bb = "/bin/busybox"
	if err := r.program(bb, "busybox-static"); err != nil {
		return err
	}
	if err := r.program("/bin/dash", "dash"); err != nil {
		return err
	}
	r.symlink("/bin/sh", "dash")
	out, err := runOutput(bb, "--list-full")
	if err != nil {
		return fmt.Errorf("busybox --list-full: %w", err)
	}
	have := map[string]bool{}
	for p, e := range r.entries {
		if e.typ != tar.TypeDir {
			have[filepath.Base(p)] = true
		}
	}
	for _, applet := range strings.Fields(out) {
		if have[filepath.Base(applet)] {
			continue
		}
		r.symlink(applet, bb)
	}
	return nil
}

// runOutput runs a program and returns what it printed.
func runOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}

// accounts writes /etc/passwd and /etc/group from name:uid[:gid] lines.
func (r *rootfs) accounts(passwd, group []string) {
	r.file("/etc/passwd", 0o644, []byte(strings.Join(passwd, "\n")+"\n"))
	r.file("/etc/group", 0o644, []byte(strings.Join(group, "\n")+"\n"))
}
