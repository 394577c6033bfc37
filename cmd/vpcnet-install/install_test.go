package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// files is a directory's content: name to bytes. A name ending in "/" is a
// directory.
type files map[string]string

func writeFiles(t *testing.T, dir string, fs files, mode os.FileMode) {
	t.Helper()
	for name, content := range fs {
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInstall(t *testing.T) {
	tests := []struct {
		name    string
		image   files // the image's plugin directory
		node    files // the node's CNI directory before
		nodeMod os.FileMode
		args    []string // after -from and -to
		want    files    // the node's CNI directory after (regular files)
		wantErr string   // in stderr, when the command must fail
	}{
		{
			name:  "fresh node gets the plugin",
			image: files{"vpcnet": "plugin v2", "vpcnetd": "agent"},
			want:  files{"vpcnet": "plugin v2"},
		},
		{
			name:  "upgrade replaces the node's plugin",
			image: files{"vpcnet": "plugin v2"},
			node:  files{"vpcnet": "plugin v1", "loopback": "theirs"},
			want:  files{"vpcnet": "plugin v2", "loopback": "theirs"},
		},
		{
			name:    "a copy that lost its execute bit is replaced",
			image:   files{"vpcnet": "plugin v2"},
			node:    files{"vpcnet": "plugin v2"},
			nodeMod: 0o644,
			want:    files{"vpcnet": "plugin v2"},
		},
		{
			name:  "required plugin the node lacks comes from the image",
			image: files{"vpcnet": "plugin", "portmap": "our portmap"},
			args:  []string{"-require", "portmap"},
			want:  files{"vpcnet": "plugin", "portmap": "our portmap"},
		},
		{
			name:  "required plugin the node has is kept",
			image: files{"vpcnet": "plugin", "portmap": "our portmap"},
			node:  files{"portmap": "node's portmap"},
			args:  []string{"-require", "portmap"},
			want:  files{"vpcnet": "plugin", "portmap": "node's portmap"},
		},
		{
			name:    "required plugin nobody has fails naming it",
			image:   files{"vpcnet": "plugin"},
			args:    []string{"-require", "portmap"},
			wantErr: `no CNI plugin "portmap"`,
		},
		{
			name:    "missing plugin in the image fails naming it",
			image:   files{"vpcnetd": "agent"},
			wantErr: "read plugin to install",
		},
		{
			name:    "a directory in the plugin's place fails naming it",
			image:   files{"vpcnet": "plugin"},
			node:    files{"vpcnet/": ""},
			wantErr: "is not a regular file",
		},
		{
			name:  "plugins named on the command line",
			image: files{"vpcnet": "plugin", "other": "other plugin"},
			args:  []string{"vpcnet", "other"},
			want:  files{"vpcnet": "plugin", "other": "other plugin"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			image, node := t.TempDir(), t.TempDir()
			writeFiles(t, image, tt.image, 0o755)
			mode := tt.nodeMod
			if mode == 0 {
				mode = 0o755
			}
			writeFiles(t, node, tt.node, mode)

			var stderr bytes.Buffer
			code := run(append([]string{"-from", image, "-to", node}, tt.args...), &stderr)
			if tt.wantErr != "" {
				if code == 0 || !strings.Contains(stderr.String(), tt.wantErr) {
					t.Fatalf("exit %d, stderr %q; want failure mentioning %q", code, stderr.String(), tt.wantErr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			got := readDir(t, node)
			if len(got) != len(tt.want) {
				t.Errorf("node has %v, want %v", keys(got), keys(tt.want))
			}
			for name, content := range tt.want {
				if got[name] != content {
					t.Errorf("node's %s = %q, want %q", name, got[name], content)
				}
				st, err := os.Stat(filepath.Join(node, name))
				if err == nil && st.Mode().Perm()&0o111 == 0 {
					t.Errorf("node's %s is not executable: %v", name, st.Mode())
				}
			}
		})
	}
}

func TestRequiredPluginLinkedOnTheNodeIsKept(t *testing.T) {
	image, node := t.TempDir(), t.TempDir()
	writeFiles(t, image, files{"vpcnet": "plugin", "portmap": "our portmap"}, 0o755)
	// The target is a host path the init container does not mount.
	if err := os.Symlink("/usr/libexec/cni/portmap", filepath.Join(node, "portmap")); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"-from", image, "-to", node, "-require", "portmap"}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if target, err := os.Readlink(filepath.Join(node, "portmap")); err != nil || target != "/usr/libexec/cni/portmap" {
		t.Errorf("node's portmap link is now %q (%v), want it kept", target, err)
	}
}

func TestInstallIsIdempotent(t *testing.T) {
	image, node := t.TempDir(), t.TempDir()
	writeFiles(t, image, files{"vpcnet": "plugin"}, 0o755)
	args := []string{"-from", image, "-to", node}
	var stderr bytes.Buffer
	if code := run(args, &stderr); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr.String())
	}
	before, err := os.Stat(filepath.Join(node, "vpcnet"))
	if err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run(args, &stderr); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, stderr.String())
	}
	after, err := os.Stat(filepath.Join(node, "vpcnet"))
	if err != nil {
		t.Fatal(err)
	}
	// A rename would give a new inode: a plugin being exec'd right now
	// keeps its file either way, but an unchanged binary stays untouched.
	if !os.SameFile(before, after) {
		t.Errorf("second run replaced an identical plugin; stderr: %s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "up to date") {
		t.Errorf("second run says %q, want it to say the plugin is up to date", stderr.String())
	}
}

func TestInstallFailsOnUnwritableNodeDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes to read-only directories; run as a normal user to check this message")
	}
	image, node := t.TempDir(), t.TempDir()
	writeFiles(t, image, files{"vpcnet": "plugin"}, 0o755)
	if err := os.Chmod(node, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(node, 0o755) })
	var stderr bytes.Buffer
	if code := run([]string{"-from", image, "-to", node}, &stderr); code == 0 || !strings.Contains(stderr.String(), "mounted writable") {
		t.Fatalf("exit %d, stderr %q; want a failure saying the directory must be mounted writable", code, stderr.String())
	}
}

// readDir returns the regular files of dir; it fails the test on leftover
// temporary files, which a crash-free install must not leave.
func readDir(t *testing.T, dir string) files {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := files{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func keys(f files) []string {
	var out []string
	for k := range f {
		out = append(out, k)
	}
	return out
}
