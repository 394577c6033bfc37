package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/bundle"
)

// readTar lists a .tar.gz's files and its MANIFEST.
func readTar(t *testing.T, r io.Reader) (names []string, manifest string) {
	t.Helper()
	gz, err := gzip.NewReader(r)
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names, manifest
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Name == "MANIFEST" {
			b, _ := io.ReadAll(tr)
			manifest = string(b)
		}
	}
}

func TestBundleWritesAFileOrStdoutAndSaysHowBig(t *testing.T) {
	agent := fakeAgent(t, readyStatus()).URL
	dir := t.TempDir()
	// The test binary is no vpcnetctl: doctor is a stub that prints findings.
	doctor := filepath.Join(dir, "vpcnetctl")
	if err := os.WriteFile(doctor, []byte("#!/bin/sh\necho '{\"findings\":[]}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := executable
	executable = func() (string, error) { return doctor, nil }
	t.Cleanup(func() { executable = saved })
	common := []string{"--agent", agent, "--metrics", agent, "--checkpoint", filepath.Join(dir, "none.json"),
		"--cni-conf-dir", dir, "--cni-bin-dir", dir, "--agent-log", filepath.Join(dir, "none.log")}

	t.Run("to a file", func(t *testing.T) {
		out := filepath.Join(dir, "b.tar.gz")
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"bundle", "-o", out}, common...), &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, &stderr)
		}
		if !strings.HasPrefix(stdout.String(), "wrote "+out+": ") || !strings.Contains(stdout.String(), "KiB") {
			t.Errorf("stdout %q does not give the file and its size", &stdout)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		names, manifest := readTar(t, f)
		for _, want := range []string{"agent/v1-status.json", "agent/metrics.txt", "MANIFEST"} {
			if !strings.Contains(strings.Join(names, " "), want) {
				t.Errorf("the bundle lacks %s: %v", want, names)
			}
		}
		if !strings.Contains(manifest, "agent/v1-status.json\tok") || !strings.Contains(manifest, "checkpoint/none.json\terror: ") || !strings.Contains(manifest, "doctor.json\tok") {
			t.Errorf("MANIFEST:\n%s", manifest)
		}
		if strings.Contains(manifest, "hunter2secret") {
			t.Error("the MANIFEST carries a secret")
		}
	})
	t.Run("to stdout", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"bundle", "-o", "-"}, common...), &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, &stderr)
		}
		if !strings.HasPrefix(stderr.String(), "wrote stdout: ") {
			t.Errorf("stderr %q does not give the size", &stderr)
		}
		if _, manifest := readTar(t, &stdout); !strings.Contains(manifest, "agent/v1-config.json\tok") {
			t.Errorf("MANIFEST:\n%s", manifest)
		}
	})
}

// The bundle runs vpcnetctl (doctor); a vpcnetctl so started never takes
// a bundle itself, so the two cannot start each other without end.
func TestABundleIsNeverTakenInsideABundle(t *testing.T) {
	t.Setenv(bundle.NestedEnv, "1")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bundle", "-o", filepath.Join(t.TempDir(), "b.tar.gz")}, &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "does not take one itself") {
		t.Errorf("exit %d, stderr %q; want %d and the reason", code, &stderr, exitFailed)
	}
}
