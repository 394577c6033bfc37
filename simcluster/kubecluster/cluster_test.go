package kubecluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
)

// Environment of the cluster tests; `make cluster-test` sets both.
const (
	envKubeBin = "VPCNET_KUBE_BIN_DIR" // bin/kube: hack/kube-build.sh's programs
	envSimBin  = "VPCNET_SIM_BIN_DIR"  // bin: vpcnetd, vpcnet, vpcnet-install, vpcnet-budget, vpcnetctl, portmap
)

const testTopology = `
region: us-west-2
vpc: {id: vpc-0kube, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}
securityGroups: [sg-0kube]
instances:
  - {id: i-node1, type: m5.large, subnet: subnet-a}
  - {id: i-node2, type: m5.large, subnet: subnet-a}
seed: 1
`

// startCluster starts a cluster for one test and stops it when the test
// ends.
func startCluster(t *testing.T, mod func(*Options)) *Cluster {
	t.Helper()
	// Only `make cluster-test` runs these (about 2 minutes a cluster on 2
	// cores): `make test` (CI=true included) skips them.
	kubeBin, simBin := os.Getenv(envKubeBin), os.Getenv(envSimBin)
	if kubeBin == "" || simBin == "" {
		t.Skip(envKubeBin + " and " + envSimBin + " are not set: the cluster tests run with `make cluster-test`")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the cluster tests need root (network and mount namespaces, cgroups)")
	}
	bins, err := BinariesIn(kubeBin)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := sim.ParseTopology([]byte(testTopology))
	if err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	state := filepath.Join(os.TempDir(), "vpcnet-kube-"+strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	// A killed earlier run of this test: its processes, cgroups and
	// namespaces, as recorded in its state directory.
	if err := FreshStateDir(state); err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Sim:      simcluster.Options{Topology: topo, BinDir: simBin, StateDir: state},
		Bins:     bins,
		RepoRoot: filepath.Join(filepath.Dir(file), "..", ".."),
	}
	if mod != nil {
		mod(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		cgroups := []string{c.cp.cgroup}
		for _, n := range c.nodes {
			cgroups = append(cgroups, n.spec.Cgroup)
		}
		prefix := c.Sim.State().Prefix
		if err := c.Close(); err != nil {
			t.Errorf("teardown: %v", err)
		}
		// Nothing left: no cgroup (so no process: a cgroup with one
		// cannot be removed), no namespace of this cluster.
		hs, err := hierarchies()
		if err != nil {
			t.Fatal(err)
		}
		for _, cg := range cgroups {
			for _, h := range hs {
				if _, err := os.Stat(filepath.Join(h, cg)); err == nil {
					t.Errorf("teardown left cgroup %s (processes %v)", filepath.Join(h, cg), cgroupPIDs(hs, cg))
				}
			}
		}
		if left, err := fabric.Names(prefix); err != nil || len(left) > 0 {
			t.Errorf("teardown left namespaces %v (%v)", left, err)
		}
		if mi, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mi), state) {
			t.Errorf("teardown left mounts under %s (%v)", state, err)
		}
		if t.Failed() {
			t.Logf("kept %s (node logs under kube/)", state)
			return
		}
		os.RemoveAll(state)
	})
	return c
}

func (c *Cluster) names(ids ...string) []string {
	var out []string
	for _, id := range ids {
		out = append(out, c.NodeNames[id])
	}
	return out
}

// poll calls f every half second until it returns nil or ctx ends.
func poll(ctx context.Context, what string, f func() error) error {
	var last error
	for {
		if last = f(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func testDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					// Spread over both nodes.
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
						WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{{
						Name: "web", Image: TestImage, ImagePullPolicy: corev1.PullNever,
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 2,
						},
					}},
				},
			},
		},
	}
}

// clientPod runs "testserver get URL..." on a node once; its phase is the
// result.
func clientPod(name, node string, urls ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "get", Image: TestImage, ImagePullPolicy: corev1.PullNever,
				Args: append([]string{"get"}, urls...),
			}},
		},
	}
}

// runClient runs a client pod and returns nil when it Succeeded.
func runClient(ctx context.Context, c *Cluster, pod *corev1.Pod) error {
	pods := c.Client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	var phase corev1.PodPhase
	err := poll(ctx, "client pod "+pod.Name, func() error {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase = p.Status.Phase
		if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
			return nil
		}
		return fmt.Errorf("phase %s", phase)
	})
	if err != nil {
		return err
	}
	if phase != corev1.PodSucceeded {
		logs, _ := pods.GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		return fmt.Errorf("client pod %s %s: %s", pod.Name, phase, logs)
	}
	return nil
}

// inSubnet says whether addr is in the test VPC's subnet.
func inSubnet(addr string) bool {
	a, err := netip.ParseAddr(addr)
	return err == nil && netip.MustParsePrefix("10.0.0.0/24").Contains(a)
}
