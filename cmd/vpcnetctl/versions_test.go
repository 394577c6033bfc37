package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/vpcnet/vpcnet/version"
)

// TestEveryBinaryReportsTheSameVersion builds the agent, the plugin and
// the CLI as a release would and checks each prints one version string:
// a support case reads them to tell whether a node runs one build.
func TestEveryBinaryReportsTheSameVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds three binaries")
	}
	dir := t.TempDir()
	// -buildvcs=auto stamps the commit, as a release build from a
	// checkout does, so the test also compares commits.
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", dir+"/", "../vpcnetd", "../vpcnet", ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The plugin prints its about string, with the version, to stderr
	// when CNI_COMMAND is unset, as every CNI plugin does.
	plugin := exec.Command(filepath.Join(dir, "vpcnet"))
	plugin.Env = []string{"PATH=/usr/bin:/bin"}
	var pluginOut bytes.Buffer
	plugin.Stderr = &pluginOut
	_ = plugin.Run() // exits non-zero: no CNI command

	outputs := map[string]string{
		"vpcnetd --version":       run1(t, filepath.Join(dir, "vpcnetd"), "--version"),
		"vpcnetctl version":       run1(t, filepath.Join(dir, "vpcnetctl"), "version", "--agent", unreachableAddr(t)),
		"vpcnetctl --version":     run1(t, filepath.Join(dir, "vpcnetctl"), "--version"),
		"vpcnet (no CNI_COMMAND)": pluginOut.String(),
	}
	// The version as the binaries' build information has it; a test
	// binary's own build information would not carry the module version.
	re := regexp.MustCompile(`(?:vpcnetd|vpcnetctl|version) (\S+ (?:commit \S+ )?\(go[^)]*\))`)
	var want string
	for name, out := range outputs {
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s printed no version:\n%s", name, out)
		}
		if want == "" {
			want = m[1]
		}
		if m[1] != want {
			t.Errorf("%s says %q, another binary says %q", name, m[1], want)
		}
	}
	if got := version.Get().GoVersion; !bytes.Contains([]byte(want), []byte(got)) {
		t.Errorf("version %q does not name the toolchain %s", want, got)
	}
}

func run1(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	return string(out)
}
