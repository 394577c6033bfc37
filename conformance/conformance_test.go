package conformance

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
	"github.com/vpcnet/vpcnet/simcluster/kubecluster"
)

// The environment `make conformance` sets.
const (
	envKubeBin = "VPCNET_KUBE_BIN_DIR" // bin/kube: hack/kube-build.sh's programs
	envSimBin  = "VPCNET_SIM_BIN_DIR"  // bin: vpcnet's programs
	envE2ETest = "VPCNET_E2E_TEST"     // hack/kube-build.sh e2e.test
	envAgnhost = "VPCNET_AGNHOST"      // hack/kube-build.sh agnhost
	envGinkgo  = "VPCNET_GINKGO"       // hack/kube-build.sh ginkgo
	envProcs   = "CONFORMANCE_PROCS"   // parallel suite processes (3 when unset)
	envSel     = "CONFORMANCE"         // a name in Selections
	envReport  = "CONFORMANCE_REPORT"  // where to write the markdown report (optional)
	envCommand = "CONFORMANCE_COMMAND" // the command the report names
)

// Two m5.large nodes in one subnet, as the cluster tests use; the suite
// needs at least two schedulable nodes.
const topology = `
region: us-west-2
vpc: {id: vpc-0e2e, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}
securityGroups: [sg-0e2e]
instances:
  - {id: i-node1, type: m5.large, subnet: subnet-a}
  - {id: i-node2, type: m5.large, subnet: subnet-a}
seed: 1
`

// topologyIPv6 is topology made dual-stack, as an EKS IPv6 cluster's VPC
// is: an Amazon-provided /56, a /64 for the subnet, and an IPv6 address
// for each new ENI, which the node's kubelet registers.
const topologyIPv6 = `
region: us-west-2
vpc: {id: vpc-0e2e6, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:e2e:6600::/56'}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24, ipv6Cidr: '2600:1f14:e2e:6601::/64', assignIpv6AddressOnCreation: true}
securityGroups: [sg-0e2e]
instances:
  - {id: i-node1, type: m5.large, subnet: subnet-a}
  - {id: i-node2, type: m5.large, subnet: subnet-a}
seed: 1
`

// TestConformance runs the selection's tests of Kubernetes' e2e suite on a
// cluster of the local cloud and fails if any of them fails. Only `make
// conformance` runs it.
func TestConformance(t *testing.T) {
	kubeBin, simBin, e2eTest, agnhost, ginkgo := os.Getenv(envKubeBin), os.Getenv(envSimBin), os.Getenv(envE2ETest), os.Getenv(envAgnhost), os.Getenv(envGinkgo)
	if kubeBin == "" || simBin == "" || e2eTest == "" || agnhost == "" || ginkgo == "" {
		t.Skip("the conformance run needs " + envKubeBin + ", " + envSimBin + ", " + envE2ETest + ", " + envAgnhost + " and " + envGinkgo + ": run it with `make conformance`")
	}
	procs := 3
	if v := os.Getenv(envProcs); v != "" {
		if _, err := fmt.Sscan(v, &procs); err != nil || procs < 1 {
			t.Fatalf("%s=%q: want a number of processes, 1 or more", envProcs, v)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("the conformance run needs root (network and mount namespaces, cgroups)")
	}
	sel, ok := Selections[os.Getenv(envSel)]
	if !ok {
		t.Fatalf("%s=%q names no selection (choose one of %s)", envSel, os.Getenv(envSel), strings.Join(slices.Sorted(maps.Keys(Selections)), ", "))
	}
	// Interrupted (Ctrl-C, or CI's timeout): stop the suite, then tear the
	// cluster down as on any other end.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	bins, err := kubecluster.BinariesIn(kubeBin)
	if err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..")
	src, err := kubernetesSource(repo)
	if err != nil {
		t.Fatal(err)
	}
	// One state directory per selection: a killed earlier run of the same
	// selection left it, and goes first; runs of two selections (CI's
	// `ci` and someone's `netpol`) do not share one.
	state := filepath.Join(os.TempDir(), "vpcnet-conformance-"+sel.Name)
	if err := kubecluster.FreshStateDir(state); err != nil {
		t.Fatal(err)
	}
	repoList := filepath.Join(state, "repo-list.yaml")
	if err := os.WriteFile(repoList, []byte(kubecluster.E2ERepoList), 0o644); err != nil {
		t.Fatal(err)
	}
	refs, err := kubecluster.E2EImageRefs(ctx, e2eTest, repoList)
	if err != nil {
		t.Fatal(err)
	}
	topoText := topology
	if sel.Family == kubecluster.IPv6 {
		topoText = topologyIPv6
	}
	topo, err := sim.ParseTopology([]byte(topoText))
	if err != nil {
		t.Fatal(err)
	}
	images := &kubecluster.E2EImages{Refs: refs, Programs: kubecluster.E2EPrograms{Agnhost: agnhost, KubernetesSrc: src, CoreDNS: bins.CoreDNS}}
	started := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	c, err := kubecluster.Start(startCtx, kubecluster.Options{
		Sim:      simcluster.Options{Topology: topo, BinDir: simBin, StateDir: state},
		Bins:     bins,
		RepoRoot: repo,
		E2E:      images,
		Family:   sel.Family,
	})
	if err != nil {
		cancel()
		t.Fatalf("start the cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("teardown: %v", err)
			return
		}
		// The nodes' state (containerd's images and snapshots, about 2 GB)
		// goes with a run that passed; the suite's log and report stay for
		// reading. A failed run keeps it all for the post-mortem, until the
		// selection's next run.
		if !t.Failed() {
			if err := os.RemoveAll(filepath.Join(state, "kube")); err != nil {
				t.Logf("remove the nodes' state: %v", err)
			}
		}
	})
	var names []string
	for _, n := range c.NodeNames {
		names = append(names, n)
	}
	err = c.WaitNodesReady(startCtx, names...)
	if err == nil {
		err = c.WaitAddonsReady(startCtx)
	}
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster up in %s; images no recipe builds: %v", time.Since(started).Round(time.Second), images.Unbuilt)

	reportDir := filepath.Join(state, "report")
	logPath := filepath.Join(state, "e2e.log")
	suite := suiteRun{ginkgo: ginkgo, procs: procs, nodes: len(names), e2eTest: e2eTest, kubectl: filepath.Join(kubeBin, "kubectl"), repoList: repoList, reportDir: reportDir, log: logPath}
	if err := suite.run(ctx, t, c, sel); err != nil {
		t.Logf("e2e.test: %v (log %s)", err, logPath)
	}
	f, err := os.Open(filepath.Join(reportDir, "junit_01.xml"))
	if err != nil {
		t.Fatalf("the suite wrote no JUnit report (log %s): %v", logPath, err)
	}
	all, err := ParseJUnit(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	results := Select(all, sel)
	for _, r := range results {
		line := fmt.Sprintf("%-7s %6s  %s", r.Status, r.Duration.Round(time.Second), r.Name)
		if r.Reason != "" {
			line += "\n          " + r.Reason
		}
		t.Log(line)
	}
	counts := Count(results)
	if out := os.Getenv(envReport); out != "" {
		run := Run{
			Command: os.Getenv(envCommand), Selection: sel, Kubernetes: kubernetesVersion(src),
			Versions: versions(ctx, bins, e2eTest), Started: started, Took: time.Since(started),
		}
		if run.Command == "" {
			run.Command = "make conformance CONFORMANCE=" + sel.Name
		}
		if sel.Family == kubecluster.IPv6 {
			run.Notes = append(run.Notes, fmt.Sprintf("The cluster is IPv6 single-stack on a dual-stack VPC, as an EKS IPv6 cluster: Services in %s (kube-dns at %s), kubelets registered by their primary ENI's IPv6 address, kube-proxy (nftables) and CoreDNS in IPv6, and vpcnet in aws-node's IPv6 mode (ENABLE_IPv6=true, ENABLE_IPv4=false, ENABLE_PREFIX_DELEGATION=true: a /80 per node, IPv4 egress through the node, which CoreDNS uses to reach the VPC's resolver; NetworkPolicy enforced, the pods' IPv6 traffic by the ip6 vpcnet-policy table and their IPv4 egress by the ip one). The suite finds the family itself, from the kubernetes Service's address, and tests in IPv6.", c.ServiceRange(), c.DNSAddress()))
		}
		if len(images.Unbuilt) > 0 {
			run.Notes = append(run.Notes, fmt.Sprintf("Images the suite names that no recipe builds (a selected test that ran one would fail with ErrImagePull, and none did if the table shows no such failure): %s.", strings.Join(images.Unbuilt, ", ")))
		}
		w, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteMarkdown(w, run, results); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", out)
	}
	// The closing line CI reads.
	fmt.Println(counts)
	// A test the suite skipped on its own was not judged: its reason is a
	// finding about the cluster or the run, not a pass.
	for _, r := range results {
		if r.Status == Skipped && !r.BySelection {
			t.Errorf("the suite skipped %q: %s", r.Name, r.Reason)
		}
	}
	if counts.Failed > 0 {
		t.Errorf("%d of the selection's tests failed (log %s)", counts.Failed, logPath)
	}
	if counts.Passed == 0 {
		t.Errorf("no test of the selection passed: the focus %q matched nothing, or the suite did not run (log %s)", sel.GinkgoFocus(), logPath)
	}
}

// suiteRun is how the suite is run: the programs, the number of parallel
// processes, and where its report and log go.
type suiteRun struct {
	ginkgo, e2eTest, kubectl string
	procs                    int
	// nodes is the cluster's schedulable nodes. The suite counts them in
	// its set-up, which runs in the first process only: the others would
	// skip every test that needs two nodes ("Requires at least 2 nodes
	// (not -1)"), so the count is given to all, as upstream's CI does.
	nodes                    int
	repoList, reportDir, log string
}

// run runs e2e.test under ginkgo's parallel runner, as upstream's CI does
// (the selections hold no [Serial] test), inside the VPC router's network
// namespace, where the control plane runs: the suite reaches the API
// server at the cluster endpoint and pods through the VPC, as a runner
// inside an EKS cluster's VPC does, and nothing it sends leaves the local
// cloud.
func (s suiteRun) run(ctx context.Context, t *testing.T, c *kubecluster.Cluster, sel Selection) error {
	log, err := os.Create(s.log)
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{
		"--net=" + c.Sim.Fabric.RouterNS(), "--",
		s.ginkgo,
		fmt.Sprintf("--procs=%d", s.procs),
		"--focus=" + sel.GinkgoFocus(),
		"--skip=" + sel.GinkgoSkip(),
		"--no-color",
		"-v",
		"--timeout=4h",
		s.e2eTest, "--",
		"--kubeconfig=" + c.VPCKubeconfig,
		"--kubectl-path=" + s.kubectl,
		"--provider=local",
		fmt.Sprintf("--num-nodes=%d", s.nodes),
		"--report-dir=" + s.reportDir,
		"--dump-logs-on-failure=false",
	}
	t.Logf("running nsenter %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+s.repoList, "KUBECONFIG="+c.VPCKubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	// Interrupted: SIGTERM first, so Ginkgo reports what it ran.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	return cmd.Run()
}

// kubernetesSource is the module directory of k8s.io/kubernetes at the
// release tools/e2e pins.
func kubernetesSource(repo string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join(repo, "tools", "e2e")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("find k8s.io/kubernetes's module in tools/e2e (go mod download there): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func kubernetesVersion(src string) string {
	_, v, ok := strings.Cut(filepath.Base(src), "@")
	if !ok {
		return "unknown"
	}
	return v
}

// versions are the programs' own version lines, for the report's head.
func versions(ctx context.Context, bins kubecluster.Binaries, e2eTest string) []string {
	var out []string
	for _, p := range []struct {
		label string
		cmd   []string
	}{
		{"e2e.test", []string{e2eTest, "--version"}},
		{"kubelet", []string{bins.Kubelet, "--version"}},
		{"kube-proxy", []string{bins.KubeProxy, "--version"}},
		{"containerd", []string{bins.Containerd, "--version"}},
		{"CoreDNS", []string{bins.CoreDNS, "-version"}},
	} {
		b, err := exec.CommandContext(ctx, p.cmd[0], p.cmd[1:]...).Output()
		line := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
		if err != nil {
			line = "unknown (" + err.Error() + ")"
		}
		out = append(out, p.label+": "+line)
	}
	return out
}
