package kubecluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
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
	Programs:   []string{"bandwidth", "host-local", "portmap", "vpcnet", "vpcnet-budget", "vpcnet-egress-v4", "vpcnet-install", "vpcnetctl", "vpcnetd"},
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
	static := func(spec ImageSpec, from string) func() (*rootfs, imageConfig, error) {
		return func() (*rootfs, imageConfig, error) { return staticRootfs(spec, from) }
	}
	archives := map[string]string{}
	for _, im := range []struct {
		ref   string
		build func() (*rootfs, imageConfig, error)
	}{
		{PauseImage, static(ImageSpec{Dir: "/", Programs: []string{"pause"}, Entrypoint: []string{"/pause"}, User: "65535:65535"}, filepath.Join(dir, "bin"))},
		{TestImage, static(ImageSpec{Dir: "/", Programs: []string{"testserver"}, Entrypoint: []string{"/testserver"}, User: "0:0"}, filepath.Join(dir, "bin"))},
		{VpcnetImage, static(VpcnetImageSpec, binDir)},
		{KubeProxyImage, func() (*rootfs, imageConfig, error) { return kubeProxyRootfs(bins.KubeProxy) }},
		{CoreDNSImage, func() (*rootfs, imageConfig, error) { return coreDNSRootfs(bins.CoreDNS) }},
	} {
		path, err := writeImage(dir, im.ref, im.build)
		if err != nil {
			return nil, err
		}
		archives[im.ref] = path
	}
	return archives, nil
}

// buildAWSNodeImages writes the Amazon VPC CNI's two images from the
// programs and files in from, and returns their archives.
func buildAWSNodeImages(dir, from string) ([]string, error) {
	var paths []string
	for ref, build := range map[string]func(string) (*rootfs, imageConfig, error){
		AWSNodeImage: awsNodeRootfs, AWSNodeInitImage: awsNodeInitRootfs,
	} {
		path, err := writeImage(dir, ref, func() (*rootfs, imageConfig, error) { return build(from) })
		if err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// writeImage builds one image and writes it as a docker archive in dir,
// named after its repository.
func writeImage(dir, ref string, build func() (*rootfs, imageConfig, error)) (string, error) {
	r, cfg, err := build()
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	img, err := r.image(cfg)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.Base(tag.RepositoryStr())+".tar")
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// staticRootfs is one layer holding the spec's programs from srcDir, plus
// what a distroless static base gives a program (/etc/passwd, /etc/group,
// a writable /tmp), and a config with the entrypoint and user.
func staticRootfs(spec ImageSpec, srcDir string) (*rootfs, imageConfig, error) {
	r := newRootfs()
	r.dir("/usr/local/bin", 0o755)
	r.accounts([]string{"root:x:0:0:root:/root:/sbin/nologin", "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"}, []string{"root:x:0:", "nonroot:x:65532:"})
	for _, p := range spec.Programs {
		data, err := os.ReadFile(filepath.Join(srcDir, p))
		if err != nil {
			return nil, imageConfig{}, fmt.Errorf("%s is not built in %s: %w", p, srcDir, err)
		}
		r.file(filepath.Join(spec.Dir, p), 0o755, data)
	}
	return r, imageConfig{Entrypoint: spec.Entrypoint, User: spec.User}, nil
}
