// Package conformance is Kubernetes' e2e test binary cut down to the
// pod network's tests: the suite's own set-up and tear-down
// (k8s.io/kubernetes/test/e2e, whose non-test files hold them) and the
// sig-network tests (test/e2e/network with its netpol package, and
// test/e2e/common/network through test/e2e/common). The full e2e.test
// also links storage, apps, auth, DRA, kubectl and the rest, which vpcnet
// does not touch and a two-core machine pays for in build time.
//
// The flags are the upstream binary's (--kubeconfig, --provider,
// --report-dir, --ginkgo.focus, --list-images, ...): `go test -c` of this package is
// used exactly as e2e.test is. The tests themselves are Kubernetes'
// unmodified code at the release go.mod pins.
package conformance

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/component-base/version"
	conformancetestdata "k8s.io/kubernetes/test/conformance/testdata"
	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// Constants the tests' labels use, frozen as upstream freezes them.
	_ "k8s.io/kubernetes/test/e2e/feature"

	// The tests: sig-network's, NetworkPolicy's among them.
	_ "k8s.io/kubernetes/test/e2e/network"
	_ "k8s.io/kubernetes/test/e2e/network/netpol"

	// The framework configured as in upstream's e2e.test: dumps on
	// failure, metrics, node checks, readable object formatting.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

func TestMain(m *testing.M) {
	showVersion := flag.Bool("version", false, "print the Kubernetes release these tests come from and exit")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	// Manifests and fixtures some tests read, from the files embedded in
	// the module rather than a Kubernetes checkout.
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	testfiles.AddFileSource(conformancetestdata.GetConformanceTestdataFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	e2e.RunE2ETests(t)
}
