package kubecluster

import (
	"archive/tar"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// layerFiles lists the paths in an image's only layer, with each link's
// target.
func layerFiles(t *testing.T, r *rootfs) map[string]string {
	t.Helper()
	img, err := r.image(imageConfig{Entrypoint: []string{"/bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for p, h := range imageLayer(t, img) {
		out[p] = h.Linkname
	}
	return out
}

// imageLayer reads the headers of an image's only layer, by path.
func imageLayer(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out["/"+strings.TrimSuffix(h.Name, "/")] = h
	}
}

// TestProgramBringsEveryLibraryItLoads: a Debian program copied into an
// image carries its dynamic loader and every shared library it needs,
// transitively, so it runs in a container with nothing else.
func TestProgramBringsEveryLibraryItLoads(t *testing.T) {
	const prog = "/usr/bin/getent" // libc-bin: on every Debian machine
	if _, err := os.Stat(prog); err != nil {
		t.Skipf("%s: %v", prog, err)
	}
	r := newRootfs()
	if err := r.program(prog, "libc-bin"); err != nil {
		t.Fatal(err)
	}
	files := layerFiles(t, r)
	for _, want := range []string{prog, "/lib64/ld-linux-x86-64.so.2", "/tmp"} {
		if _, ok := files[want]; !ok {
			t.Errorf("image lacks %s; it has %v", want, files)
		}
	}
	libc := false
	for p := range files {
		libc = libc || strings.HasSuffix(p, "/libc.so.6")
	}
	if !libc {
		t.Errorf("image lacks libc.so.6: %v", files)
	}
}

func TestMissingProgramNamesThePackageToInstall(t *testing.T) {
	err := newRootfs().program("/usr/bin/no-such-program-here", "some-package")
	if err == nil || !strings.Contains(err.Error(), "apt-get install some-package") {
		t.Fatalf("error %v, want one naming `apt-get install some-package`", err)
	}
}

func TestLayerIsTheSameForTheSameTree(t *testing.T) {
	build := func() string {
		r := newRootfs()
		r.file("/etc/b", 0o644, []byte("b"))
		r.file("/etc/a", 0o644, []byte("a"))
		r.symlink("/bin/sh", "busybox")
		l, err := r.layer()
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	if a, b := build(), build(); a != b {
		t.Errorf("two builds of one tree: %s and %s", a, b)
	}
}

func TestVPCResolverIsTheVPCBasePlusTwo(t *testing.T) {
	got, err := vpcResolver([]string{"10.0.0.0/16", "100.64.0.0/16"})
	if err != nil || got.String() != "10.0.0.2" {
		t.Errorf("vpcResolver = %v, %v; want 10.0.0.2 (AmazonProvidedDNS)", got, err)
	}
	if _, err := vpcResolver(nil); err == nil {
		t.Error("a VPC without CIDRs gave a resolver")
	}
}

// TestDNSProberImageHasWhatTheDNSTestsRun: the e2e DNS tests' probers run
// `sh -c` scripts of dig, getent, seq, test and echo; an image without one
// of them fails every DNS test with a confusing timeout.
func TestDNSProberImageHasWhatTheDNSTestsRun(t *testing.T) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/dig", "/usr/bin/curl", "/usr/bin/wget"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is not installed (make conformance's Debian packages; .ci/run installs them): %v", p, err)
		}
	}
	r, _, err := e2eImageRecipes["glibc-dns-testing"](E2EPrograms{}, "")
	if err != nil {
		t.Fatal(err)
	}
	files := layerFiles(t, r)
	for _, want := range []string{"/bin/sh", "/usr/bin/dig", "/usr/bin/getent", "/usr/bin/seq", "/bin/sleep", "/usr/bin/test", "/bin/echo", "/bin/nc", "/usr/bin/curl", "/etc/nsswitch.conf"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the DNS prober image lacks %s", want)
		}
	}
	// Debian's own programs win over busybox's applets of the same name,
	// wherever busybox would put its applet: PATH has /sbin before /bin.
	for _, p := range []string{"/bin/ip", "/bin/nc", "/usr/bin/nc", "/sbin/ip", "/usr/bin/wget", "/bin/wget"} {
		if files[p] == "/bin/busybox" {
			t.Errorf("%s is busybox's applet, want the Debian program", p)
		}
	}
	// The shell runs what PATH finds: busybox-static's own ash would run
	// its applets first (nc without -v, the Services tests' probe).
	if files["/bin/sh"] != "dash" {
		t.Errorf("/bin/sh links to %q, want dash", files["/bin/sh"])
	}
}

// TestVPCResolverAnswersEC2NamesAndNothingElse: the resolver's
// configuration answers the region's private DNS names from the name
// itself, says NXDOMAIN for everything else (a search domain that gets
// no answer at all, or REFUSED, stops dig's +search walk: every e2e DNS
// probe of a cluster name then fails), and listens only on the VPC's .2.
func TestVPCResolverAnswersEC2NamesAndNothingElse(t *testing.T) {
	conf, err := vpcResolverCorefile(netip.MustParseAddr("10.0.0.2"), "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"bind 10.0.0.2",
		`match "^ip-(\d+)-(\d+)-(\d+)-(\d+)[.]us-west-2[.]compute[.]internal[.]$"`,
		`answer "{{ .Name }} 60 IN A {{ index .Match 1 }}.{{ index .Match 2 }}.{{ index .Match 3 }}.{{ index .Match 4 }}"`,
		"template ANY ANY {\n        rcode NXDOMAIN",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "forward") {
		t.Errorf("the VPC resolver forwards somewhere outside the local cloud:\n%s", conf)
	}
}
