package kubecluster

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image names: a registry host that does not exist, so a node that lacks
// an image fails visibly instead of pulling something else.
const (
	PauseImage  = "vpcnet.local/pause:local"
	TestImage   = "vpcnet.local/testserver:local"
	VpcnetImage = "vpcnet.local/vpcnet:local"
)

// VpcnetImageSpec is what the vpcnet image holds, as the repository's
// Dockerfile describes it: the programs in /usr/local/bin, vpcnetd as the
// entrypoint, run as root. TestImageMatchesDockerfile keeps the two in step.
var VpcnetImageSpec = ImageSpec{
	Dir:        "/usr/local/bin",
	Programs:   []string{"portmap", "vpcnet", "vpcnet-budget", "vpcnet-install", "vpcnetctl", "vpcnetd"},
	Entrypoint: []string{"/usr/local/bin/vpcnetd"},
	User:       "0:0",
}

// ImageSpec describes an image of static programs in one directory.
type ImageSpec struct {
	Dir        string
	Programs   []string
	Entrypoint []string
	User       string
}

// buildImages writes the pause, test and vpcnet images and the add-ons'
// (kube-proxy, CoreDNS) as docker archives into dir, which
// `ctr images import` reads. binDir holds vpcnet's programs (make
// build-image-bins); the pause and test programs are built
// here from this repository.
func buildImages(ctx context.Context, dir, binDir, repoRoot string, bins Binaries) (map[string]string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return nil, err
	}
	for _, p := range []string{"pause", "testserver"} {
		out := filepath.Join(dir, "bin", p)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./simcluster/kubecluster/images/"+p)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %w: %s", p, err, b)
		}
	}
	archives := map[string]string{}
	for _, im := range []struct {
		ref  string
		spec ImageSpec
		from string
	}{
		{PauseImage, ImageSpec{Dir: "/", Programs: []string{"pause"}, Entrypoint: []string{"/pause"}, User: "65535:65535"}, filepath.Join(dir, "bin")},
		{TestImage, ImageSpec{Dir: "/", Programs: []string{"testserver"}, Entrypoint: []string{"/testserver"}, User: "0:0"}, filepath.Join(dir, "bin")},
		{VpcnetImage, VpcnetImageSpec, binDir},
	} {
		img, err := staticImage(im.spec, im.from)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", im.ref, err)
		}
		tag, err := name.NewTag(im.ref)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, filepath.Base(tag.RepositoryStr())+".tar")
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		archives[im.ref] = path
	}
	for _, im := range []struct {
		ref   string
		build func() (*rootfs, imageConfig, error)
	}{
		{KubeProxyImage, func() (*rootfs, imageConfig, error) { return kubeProxyRootfs(bins.KubeProxy) }},
		{CoreDNSImage, func() (*rootfs, imageConfig, error) { return coreDNSRootfs(bins.CoreDNS) }},
	} {
		r, cfg, err := im.build()
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", im.ref, err)
		}
		img, err := r.image(cfg)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", im.ref, err)
		}
		tag, err := name.NewTag(im.ref)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, filepath.Base(tag.RepositoryStr())+".tar")
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		archives[im.ref] = path
	}
	return archives, nil
}

// staticImage is one layer holding the spec's programs from srcDir, plus
// what a distroless static base gives a program (/etc/passwd, /etc/group,
// a writable /tmp), and a config with the entrypoint and user.
func staticImage(spec ImageSpec, srcDir string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	addDir := func(d string, mode int64) error {
		if d == "/" || d == "." || dirs[d] {
			return nil
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: mode})
	}
	for _, d := range []string{"/etc", "/usr", "/usr/local", "/usr/local/bin"} {
		if err := addDir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := addDir("/tmp", 0o1777); err != nil {
		return nil, err
	}
	for file, body := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
		"etc/group":  "root:x:0:\nnonroot:x:65532:\n",
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: file, Mode: 0o644, Size: int64(len(body))}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return nil, err
		}
	}
	progs := append([]string(nil), spec.Programs...)
	sort.Strings(progs)
	for _, p := range progs {
		data, err := os.ReadFile(filepath.Join(srcDir, p))
		if err != nil {
			return nil, fmt.Errorf("%s is not built in %s: %w", p, srcDir, err)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: filepath.Join(spec.Dir, p)[1:], Mode: 0o755, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerData := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerData)), nil
	})
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
	cfg.Config.Entrypoint = spec.Entrypoint
	cfg.Config.User = spec.User
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return mutate.ConfigFile(img, cfg)
}
