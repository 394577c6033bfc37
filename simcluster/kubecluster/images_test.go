package kubecluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestImageMatchesDockerfile keeps the vpcnet image the local cloud builds
// (VpcnetImageSpec) in step with the repository's Dockerfile: the same
// programs, in the same directory, the same entrypoint and user. A program
// added to one and not the other fails here.
func TestImageMatchesDockerfile(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	var progs []string
	build := regexp.MustCompile(`go build [^\n]*-o /out/((?: \./cmd/[a-z0-9-]+)+)`).FindStringSubmatch(df)
	if build == nil {
		t.Fatal("Dockerfile: no `go build ... -o /out/ ./cmd/...` line")
	}
	for _, f := range strings.Fields(build[1]) {
		progs = append(progs, filepath.Base(f))
	}
	for _, m := range regexp.MustCompile(`cp \{\} /out/([a-z0-9-]+)`).FindAllStringSubmatch(df, -1) {
		progs = append(progs, m[1])
	}
	slices.Sort(progs)
	want := slices.Sorted(slices.Values(VpcnetImageSpec.Programs))
	if !slices.Equal(progs, want) {
		t.Errorf("Dockerfile puts %v in the image, VpcnetImageSpec %v", progs, want)
	}
	copyTo := regexp.MustCompile(`(?m)^COPY --from=build /out/ (\S+?)/?$`).FindStringSubmatch(df)
	if copyTo == nil || copyTo[1] != VpcnetImageSpec.Dir {
		t.Errorf("Dockerfile copies the programs to %v, VpcnetImageSpec.Dir is %s", copyTo, VpcnetImageSpec.Dir)
	}
	entry := regexp.MustCompile(`(?m)^ENTRYPOINT (\[.*\])$`).FindStringSubmatch(df)
	var ep []string
	if entry == nil || json.Unmarshal([]byte(entry[1]), &ep) != nil || !slices.Equal(ep, VpcnetImageSpec.Entrypoint) {
		t.Errorf("Dockerfile ENTRYPOINT %v, VpcnetImageSpec %v", entry, VpcnetImageSpec.Entrypoint)
	}
	user := regexp.MustCompile(`(?m)^USER (\S+)$`).FindStringSubmatch(df)
	if user == nil || user[1] != VpcnetImageSpec.User {
		t.Errorf("Dockerfile USER %v, VpcnetImageSpec %s", user, VpcnetImageSpec.User)
	}
}

// TestStaticImage: the image holds each program, executable, where the
// spec says, and its config runs the entrypoint as the user.
func TestStaticImage(t *testing.T) {
	src := t.TempDir()
	for _, p := range VpcnetImageSpec.Programs {
		if err := os.WriteFile(filepath.Join(src, p), []byte("#!"+p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, c, err := staticRootfs(VpcnetImageSpec, src)
	if err != nil {
		t.Fatal(err)
	}
	img, err := r.image(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, VpcnetImageSpec.Entrypoint) || cfg.Config.User != VpcnetImageSpec.User || cfg.OS != "linux" {
		t.Errorf("config: entrypoint %v user %q os %q", cfg.Config.Entrypoint, cfg.Config.User, cfg.OS)
	}
	files := map[string]int64{}
	for p, h := range imageLayer(t, img) {
		files[p] = h.Mode
	}
	for _, p := range VpcnetImageSpec.Programs {
		path := filepath.Join(VpcnetImageSpec.Dir, p)
		if mode, ok := files[path]; !ok || mode&0o111 == 0 {
			t.Errorf("%s missing or not executable in the layer (%v)", path, files)
		}
	}
	if _, _, err := staticRootfs(VpcnetImageSpec, t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not built") {
		t.Errorf("image from an empty directory: %v, want an error naming the missing program", err)
	}
}
