package kubecluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// E2ERepoList is the KUBE_TEST_REPO_LIST file given to Kubernetes' e2e
// tests (their documented registry override): every registry they pull
// from becomes a name under vpcnet.local, a registry host that does not
// exist, so an image the nodes lack fails visibly (ErrImagePull) instead
// of being fetched from outside. The images under these names are built
// here and imported into every node.
const E2ERepoList = `promoterE2eRegistry: vpcnet.local/e2e-test-images
buildImageRegistry: vpcnet.local/build-image
gcEtcdRegistry: vpcnet.local
gcRegistry: vpcnet.local
sigStorageRegistry: vpcnet.local/sig-storage
privateRegistry: vpcnet.local/k8s-authenticated-test
dockerLibraryRegistry: vpcnet.local/library
cloudProviderGcpRegistry: vpcnet.local/cloud-provider-gcp
invalidRegistry: invalid.registry.k8s.io/invalid
`

// E2EPrograms are what the e2e images are made of besides Debian's
// packages: agnhost (hack/kube-build.sh agnhost) and the module
// directory of k8s.io/kubernetes at the same release, for the files
// upstream's agnhost image adds (porter's TLS certificate).
type E2EPrograms struct {
	Agnhost       string
	KubernetesSrc string
	CoreDNS       string
}

// e2eImageRecipes say how to build each image the e2e tests name, by the
// image's name (the last path element of its repository). The tag is the
// one the e2e binary asks for (E2EImageRefs): the recipe stands for every
// tag of that name.
var e2eImageRecipes = map[string]func(p E2EPrograms, pause string) (*rootfs, imageConfig, error){
	// agnhost: upstream's is Alpine with bind-tools, curl, netcat,
	// iproute2, bash and socat; here the same tools from Debian (glibc,
	// not musl: the DNS tests' "musl" prober resolves through glibc too).
	"agnhost": func(p E2EPrograms, _ string) (*rootfs, imageConfig, error) {
		r, err := toolbox()
		if err != nil {
			return nil, imageConfig{}, err
		}
		if err := r.copyFile(p.Agnhost, "/agnhost"); err != nil {
			return nil, imageConfig{}, fmt.Errorf("agnhost (hack/kube-build.sh agnhost): %w", err)
		}
		r.symlink("/agnhost-2", "agnhost")
		if p.CoreDNS != "" {
			if err := r.copyFile(p.CoreDNS, "/coredns"); err != nil {
				return nil, imageConfig{}, err
			}
		}
		for _, f := range []string{"localhost.crt", "localhost.key"} {
			if err := r.copyFile(filepath.Join(p.KubernetesSrc, "test/images/agnhost/porter", f), "/"+f); err != nil {
				return nil, imageConfig{}, err
			}
		}
		r.dir("/uploads", 0o755)
		r.accounts(
			[]string{"root:x:0:0:root:/root:/bin/sh", "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh", "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin"},
			[]string{"root:x:0:", "user-defined-in-image:x:1000:", "group-defined-in-image:x:50000:user-defined-in-image", "nogroup:x:65534:"})
		return r, imageConfig{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, WorkingDir: "/"}, nil
	},
	// glibc-dns-testing: a glibc resolver (getent) and dig.
	"glibc-dns-testing": func(E2EPrograms, string) (*rootfs, imageConfig, error) {
		r, err := toolbox()
		return r, imageConfig{Cmd: []string{"sh"}}, err
	},
	"busybox": func(E2EPrograms, string) (*rootfs, imageConfig, error) {
		r := newRootfs()
		r.accounts([]string{"root:x:0:0:root:/root:/bin/sh", "nobody:x:65534:65534:nobody:/home:/bin/false"}, []string{"root:x:0:", "nogroup:x:65534:"})
		return r, imageConfig{Cmd: []string{"sh"}}, r.busybox()
	},
	// nginx: Debian's nginx-light serving a fixed page on port 80, as the
	// tests that run it only need a container that keeps running and
	// answers HTTP.
	"nginx": func(E2EPrograms, string) (*rootfs, imageConfig, error) {
		r := newRootfs()
		if err := r.program("/usr/sbin/nginx", "nginx-light"); err != nil {
			return nil, imageConfig{}, err
		}
		r.file("/etc/nginx/nginx.conf", 0o644, []byte(`daemon off;
user root;
pid /run/nginx.pid;
error_log stderr;
events {}
http {
    access_log off;
    client_body_temp_path /tmp;
    proxy_temp_path /tmp;
    fastcgi_temp_path /tmp;
    uwsgi_temp_path /tmp;
    scgi_temp_path /tmp;
    server {
        listen 80;
        location / { return 200 "nginx\n"; }
    }
}
`))
		r.dir("/run", 0o755)
		r.dir("/var/lib/nginx", 0o755)
		r.dir("/var/log/nginx", 0o755)
		r.accounts([]string{"root:x:0:0:root:/root:/bin/sh"}, []string{"root:x:0:"})
		return r, imageConfig{Entrypoint: []string{"/usr/sbin/nginx"}}, nil
	},
	"pause": func(_ E2EPrograms, pause string) (*rootfs, imageConfig, error) {
		r := newRootfs()
		if err := r.copyFile(pause, "/pause"); err != nil {
			return nil, imageConfig{}, err
		}
		return r, imageConfig{Entrypoint: []string{"/pause"}, User: "65535:65535"}, nil
	},
}

// toolbox is a root file system with busybox's shell and utilities and
// Debian's dig, getent, curl, wget, nc, ip, ss, bash, socat and conntrack: what
// the sig-network tests run inside agnhost and the DNS probers.
func toolbox() (*rootfs, error) {
	r := newRootfs()
	for _, p := range []struct{ path, pkg string }{
		{"/usr/bin/dig", "bind9-dnsutils"},
		{"/usr/bin/getent", "libc-bin"},
		{"/usr/bin/curl", "curl"},
		// Not busybox-static's wget: statically linked against glibc,
		// it crashes (SIGSEGV) loading glibc's NSS modules to resolve
		// the URL's service, and the Services tests probe with wget.
		{"/usr/bin/wget", "wget"},
		{"/bin/nc.openbsd", "netcat-openbsd"},
		{"/bin/ip", "iproute2"},
		{"/bin/ss", "iproute2"},
		{"/bin/bash", "bash"},
		{"/usr/bin/socat", "socat"},
		{"/usr/sbin/conntrack", "conntrack"},
	} {
		if err := r.program(p.path, p.pkg); err != nil {
			return nil, err
		}
	}
	r.symlink("/bin/nc", "nc.openbsd")
	r.symlink("/usr/bin/nc", "/bin/nc.openbsd")
	r.file("/etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n"))
	if err := r.busybox(); err != nil {
		return nil, err
	}
	return r, nil
}

// E2EImageRefs asks the e2e binary which images its tests use, with
// E2ERepoList's names (the framework's --list-images flag).
func E2EImageRefs(ctx context.Context, e2eTest, repoList string) ([]string, error) {
	cmd := exec.CommandContext(ctx, e2eTest, "--list-images")
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-images: %w", e2eTest, err)
	}
	return strings.Fields(string(out)), nil
}

// buildE2EImages writes a docker archive for each image in refs that a
// recipe knows, all tags of one name in one archive, and returns the
// archives and the refs no recipe builds (tests using those fail with
// ErrImagePull; the caller says so).
func buildE2EImages(dir string, refs []string, p E2EPrograms, pause string) (archives []string, unbuilt []string, err error) {
	byName := map[string][]name.Tag{}
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			return nil, nil, fmt.Errorf("image %q: %w", ref, err)
		}
		n := filepath.Base(tag.RepositoryStr())
		if e2eImageRecipes[n] == nil {
			unbuilt = append(unbuilt, ref)
			continue
		}
		byName[n] = append(byName[n], tag)
	}
	sort.Strings(unbuilt)
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	for _, n := range names {
		r, cfg, err := e2eImageRecipes[n](p, pause)
		if err != nil {
			return nil, nil, fmt.Errorf("image %s: %w", n, err)
		}
		img, err := r.image(cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("image %s: %w", n, err)
		}
		tags := map[name.Reference]v1.Image{}
		for _, t := range byName[n] {
			tags[t] = img
		}
		path := filepath.Join(dir, "e2e-"+n+".tar")
		if err := tarball.MultiRefWriteToFile(path, tags); err != nil {
			return nil, nil, fmt.Errorf("write %s: %w", path, err)
		}
		archives = append(archives, path)
	}
	return archives, unbuilt, nil
}
