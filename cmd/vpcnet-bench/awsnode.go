package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
	"github.com/vpcnet/vpcnet/simcluster/kubecluster"
)

// The awsnode scenario (issue 24) runs the Amazon VPC CNI and vpcnet side
// by side on one cluster of real kubelets and containerd: each pair of
// nodes is one instance type, one node of the pair on aws-node (built from
// the module proxy, installed from its own manifest) and one on vpcnet,
// each DaemonSet kept to its nodes by a node label. Both get the same
// work at the same instant: a Deployment of n pods pinned to each node,
// first on the node as its agent left it at start ("fresh": the pool the
// agent made by itself, ENIs attached for pods beyond it), then again
// once the first Deployment's pods are gone and their addresses have
// cooled ("warm": the pool the first one grew).

// sideLabel is the node label that keeps each CNI's DaemonSet to its
// nodes, as a node group's label would.
const sideLabel = "bench.vpcnet.io/cni"

// The two CNIs, as the label and the tables name them.
const (
	cniAWSNode = "aws-node"
	cniVpcnet  = "vpcnet"
)

// sidePair is one instance type with a node on each CNI, and the size of
// the Deployment each gets.
type sidePair struct {
	instanceType string
	pods         int
	nodes        map[string]string // CNI → instance ID
}

var sidePairs = []sidePair{
	{instanceType: "m5.large", pods: 10, nodes: map[string]string{cniAWSNode: "i-aws-small", cniVpcnet: "i-vpcnet-small"}},
	{instanceType: "m5.4xlarge", pods: 100, nodes: map[string]string{cniAWSNode: "i-aws-big", cniVpcnet: "i-vpcnet-big"}},
}

// sideTopology: one subnet large enough for both big nodes' pools.
const sideTopology = `
region: us-west-2
vpc: {id: vpc-side, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/20}
securityGroups: [sg-side]
instances:
%sattachDelay: 2s
detachDelay: 1s
seed: 1
`

// sidePoolEnv are aws-node's manifest's pool settings, given to vpcnet
// too so that both nodes are asked for the same pool.
var sidePoolEnv = []string{"WARM_ENI_TARGET=1"}

// agentProgram is each CNI's node agent, as its process is named.
var agentProgram = map[string]string{cniAWSNode: "aws-k8s-agent", cniVpcnet: "vpcnetd"}

func (o options) checkAWSNode() error {
	if o.kubeBin == "" || o.awsNode == "" {
		return errors.New("the awsnode scenario runs a cluster of real kubelets with aws-node and vpcnet side by side: pass --kube-bin DIR and --aws-node DIR (make bench-awsnode builds both and runs it)")
	}
	if _, err := kubecluster.BinariesIn(o.kubeBin); err != nil {
		return fmt.Errorf("--kube-bin: %w", err)
	}
	for _, f := range []string{"aws-k8s-agent", kubecluster.AWSNodeManifest} {
		if _, err := os.Stat(filepath.Join(o.awsNode, f)); err != nil {
			return fmt.Errorf("--aws-node %s (make aws-node-bins): %w", o.awsNode, err)
		}
	}
	for _, f := range []string{"vpcnet-install", "vpcnet-budget", "vpcnetctl", "bandwidth"} {
		if _, err := os.Stat(filepath.Join(o.bin, f)); err != nil {
			return fmt.Errorf("--bin %s lacks what vpcnet's image holds (make build-image-bins): %w", o.bin, err)
		}
	}
	return nil
}

// sideRun is one Deployment on one node and what it cost.
type sideRun struct {
	cni, phase, instance, node string
	pods                       int
	ready                      []time.Duration // from the Deployment's creation, per pod
	failedSandboxes            int             // FailedCreatePodSandBox events
	sandboxChanged             int             // SandboxChanged events: a sandbox killed and re-created
	enisBefore, addrsBefore    int             // the node's pool in EC2 when the run began
	enisAfter, addrsAfter      int
}

func (b *bench) awsnode(ctx context.Context, res *Result) error {
	bins, err := kubecluster.BinariesIn(b.opts.kubeBin)
	if err != nil {
		return err
	}
	var instances strings.Builder
	nodeOpts := map[string]kubecluster.NodeOptions{}
	for _, p := range sidePairs {
		for _, cni := range []string{cniAWSNode, cniVpcnet} {
			fmt.Fprintf(&instances, "  - {id: %s, type: %s, subnet: subnet-a}\n", p.nodes[cni], p.instanceType)
			nodeOpts[p.nodes[cni]] = kubecluster.NodeOptions{Labels: map[string]string{sideLabel: cni}}
		}
	}
	topo, err := sim.ParseTopology(fmt.Appendf(nil, sideTopology, instances.String()))
	if err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	dir := filepath.Join(b.scratch, "awsnode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	kc, err := kubecluster.Start(ctx, kubecluster.Options{
		Sim:  simcluster.Options{Topology: topo, BinDir: b.opts.bin, StateDir: dir, Prefix: b.prefix + "awsnode-", Logger: b.log},
		Bins: bins, RepoRoot: b.opts.module, Nodes: nodeOpts,
		SkipVpcnet: true, AWSNode: &kubecluster.AWSNode{Dir: b.opts.awsNode},
		AgentEnv: sidePoolEnv, Logger: b.log.With("scenario", "awsnode"),
	})
	if err != nil {
		return fmt.Errorf("start the cluster: %w", err)
	}
	defer kc.Close()
	cfg := restclient.CopyConfig(kc.Config)
	cfg.QPS, cfg.Burst = -1, 0
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	w, err := watchSide(ctx, client)
	if err != nil {
		return err
	}

	// Both CNIs installed at one instant; each node's Ready is timed from
	// there and from its agent's start.
	installed := time.Now()
	var g errgroup.Group
	g.Go(func() error { return kc.InstallAWSNodeOn(ctx, map[string]string{sideLabel: cniAWSNode}) })
	g.Go(func() error { return kc.InstallVpcnetOn(ctx, map[string]string{sideLabel: cniVpcnet}) })
	if err := g.Wait(); err != nil {
		return err
	}
	if err := kc.WaitNodesReady(ctx, slices.Collect(maps.Values(kc.NodeNames))...); err != nil {
		return err
	}
	if err := kc.WaitAddonsReady(ctx); err != nil {
		return err
	}
	starts := map[string]sideStart{}
	for _, p := range sidePairs {
		for cni, id := range p.nodes {
			st, err := w.agentStart(ctx, kc.NodeNames[id], cni, installed)
			if err != nil {
				return err
			}
			starts[id] = st
		}
	}

	loadBefore := loadAverage()
	var runs []*sideRun
	for _, p := range sidePairs {
		for _, phase := range []string{"fresh", "warm"} {
			pr, err := b.sideBySide(ctx, kc, client, w, p, phase)
			runs = append(runs, pr...)
			if err != nil {
				return err
			}
		}
	}
	usage := map[string]usage{}
	for _, p := range sidePairs {
		for cni, id := range p.nodes {
			u, err := agentUsage(kc, id, agentProgram[cni])
			if err != nil {
				return err
			}
			usage[id] = u
		}
	}
	res.Tables = sideTables(runs, starts, usage, kc.Sim.Cloud)
	res.Tables[0].Notes = append(res.Tables[0].Notes, fmt.Sprintf("the machine's load average (1 minute) was %s when the first Deployment was made and %s after the last: whatever else ran slowed both nodes alike, but the absolute times are the machine's", loadBefore, loadAverage()))
	sideGoals(res, runs, starts, usage, kc.Sim.Cloud)
	return nil
}

// sideBySide creates both nodes' Deployments of the pair at one instant,
// waits for every pod Ready, then deletes them and waits for the pods to
// be gone and their addresses to have cooled (30 s, both agents' default
// cooldown), so the next phase starts on a pool at rest.
func (b *bench) sideBySide(ctx context.Context, kc *kubecluster.Cluster, client kubernetes.Interface, w *sideWatch, p sidePair, phase string) ([]*sideRun, error) {
	var runs []*sideRun
	for _, cni := range []string{cniAWSNode, cniVpcnet} {
		id := p.nodes[cni]
		r := &sideRun{cni: cni, phase: phase, instance: id, node: kc.NodeNames[id], pods: p.pods}
		r.enisBefore, r.addrsBefore = pool(kc.Sim.Cloud, id)
		runs = append(runs, r)
	}
	fmt.Fprintf(os.Stderr, "vpcnet-bench: awsnode: %d pods on each %s node, %s\n", p.pods, p.instanceType, phase)
	start := time.Now()
	var g errgroup.Group
	for _, r := range runs {
		g.Go(func() error {
			d := sideDeployment(r, p.pods)
			if _, err := client.AppsV1().Deployments(sideNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
				return err
			}
			return w.waitReady(ctx, d.Name, p.pods, start, &r.ready)
		})
	}
	if err := g.Wait(); err != nil {
		return runs, fmt.Errorf("%d pods on each %s node (%s): %w", p.pods, p.instanceType, phase, err)
	}
	for _, r := range runs {
		r.enisAfter, r.addrsAfter = pool(kc.Sim.Cloud, r.instance)
		name := sideDeploymentName(r)
		ev, err := client.CoreV1().Events(sideNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return runs, err
		}
		for _, e := range ev.Items {
			if !strings.HasPrefix(e.InvolvedObject.Name, name+"-") {
				continue
			}
			switch e.Reason {
			case "FailedCreatePodSandBox":
				r.failedSandboxes += int(max(e.Count, 1))
			case "SandboxChanged":
				r.sandboxChanged += int(max(e.Count, 1))
			}
		}
		if err := client.AppsV1().Deployments(sideNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return runs, err
		}
	}
	for _, r := range runs {
		if err := w.waitGone(ctx, sideDeploymentName(r)); err != nil {
			return runs, err
		}
	}
	select {
	case <-ctx.Done():
		return runs, ctx.Err()
	case <-time.After(35 * time.Second): // the addresses' 30 s cooldown
	}
	return runs, nil
}

// sideNamespace holds the benchmark's Deployments.
const sideNamespace = "default"

func sideDeploymentName(r *sideRun) string { return fmt.Sprintf("%s-%s-%d", r.cni, r.phase, r.pods) }

// sideDeployment is n pods of the test server pinned to r's node, Ready
// when kubelet's probe reaches the pod's address.
func sideDeployment(r *sideRun, n int) *appsv1.Deployment {
	labels := map[string]string{"app": sideDeploymentName(r)}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: sideDeploymentName(r)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(n)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{"kubernetes.io/hostname": r.node},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "web", Image: kubecluster.TestImage, ImagePullPolicy: corev1.PullNever,
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
}

// loadAverage is /proc/loadavg's one-minute figure, or "unknown".
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// pool is the node's ENIs and their secondary addresses, as EC2 has them.
func pool(c *sim.Cloud, id string) (enis, addrs int) {
	ifs, err := c.Interfaces(id)
	if err != nil {
		return 0, 0
	}
	for _, e := range ifs {
		enis++
		addrs += max(len(e.Addresses)-1, 0)
	}
	return enis, addrs
}

// sideStart is when a node's agent started and when the node turned Ready.
type sideStart struct {
	sinceInstall time.Duration // DaemonSet applied → Node Ready
	sinceAgent   time.Duration // agent container started → Node Ready (1 s resolution: the kubelet's)
}

// agentUsage reads the node agent's memory from /proc.
func agentUsage(kc *kubecluster.Cluster, id, program string) (usage, error) {
	pids, err := kc.NodePIDs(id)
	if err != nil {
		return usage{}, err
	}
	for _, pid := range pids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(comm)) == program {
			return readUsage(pid)
		}
	}
	return usage{}, fmt.Errorf("no %s process on node %s", program, id)
}

// sideWatch follows the cluster's Nodes and pods, timing each change as
// it is seen here (the API's own timestamps have a second's resolution).
type sideWatch struct {
	mu      sync.Mutex
	changed chan struct{}        // closed and replaced at every change
	ready   map[string]time.Time // pod name → first seen Ready
	pods    map[string]bool      // pod names that exist
	nodes   map[string]time.Time // Node name → first seen Ready
	agents  cache.Store          // the CNI DaemonSets' pods
}

func watchSide(ctx context.Context, client kubernetes.Interface) (*sideWatch, error) {
	w := &sideWatch{changed: make(chan struct{}), ready: map[string]time.Time{}, pods: map[string]bool{}, nodes: map[string]time.Time{}}
	f := informers.NewSharedInformerFactory(client, 0)
	pods := f.Core().V1().Pods().Informer()
	nodes := f.Core().V1().Nodes().Informer()
	onPod := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Namespace != sideNamespace {
			return
		}
		w.note(func() {
			w.pods[p.Name] = true
			if _, seen := w.ready[p.Name]; !seen && podReady(p) {
				w.ready[p.Name] = time.Now()
			}
		})
	}
	onNode := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		w.note(func() {
			if _, seen := w.nodes[n.Name]; !seen && kubecluster.NodeReady(n) {
				w.nodes[n.Name] = time.Now()
			}
		})
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, o any) { onPod(o) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				w.note(func() { delete(w.pods, p.Name) })
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onNode, UpdateFunc: func(_, o any) { onNode(o) }}); err != nil {
		return nil, err
	}
	w.agents = pods.GetStore()
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watch %v: not synced", typ)
		}
	}
	return w, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *sideWatch) note(fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn()
	close(w.changed)
	w.changed = make(chan struct{})
}

// until waits for cond (called under the lock) to hold, at most 10 minutes.
func (w *sideWatch) until(ctx context.Context, what string, cond func() error) error {
	limit := time.NewTimer(10 * time.Minute)
	defer limit.Stop()
	for {
		w.mu.Lock()
		err := cond()
		changed := w.changed
		w.mu.Unlock()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-limit.C:
			return fmt.Errorf("%s: not in 10 minutes: %w", what, err)
		case <-changed:
		}
	}
}

// waitReady waits for n pods of Deployment name to be Ready and puts how
// long each took after start in out.
func (w *sideWatch) waitReady(ctx context.Context, name string, n int, start time.Time, out *[]time.Duration) error {
	return w.until(ctx, name+" ready", func() error {
		var got []time.Duration
		for pod, at := range w.ready {
			if strings.HasPrefix(pod, name+"-") && w.pods[pod] {
				got = append(got, at.Sub(start))
			}
		}
		if len(got) < n {
			return fmt.Errorf("%d of %d pods Ready", len(got), n)
		}
		*out = got
		return nil
	})
}

// waitGone waits until no pod of Deployment name exists.
func (w *sideWatch) waitGone(ctx context.Context, name string) error {
	return w.until(ctx, name+" gone", func() error {
		left := 0
		for pod := range w.pods {
			if strings.HasPrefix(pod, name+"-") {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d pods left", left)
		}
		return nil
	})
}

// agentStart is when the node turned Ready after the CNI was installed,
// and after its agent's container started.
func (w *sideWatch) agentStart(ctx context.Context, node, cni string, installed time.Time) (sideStart, error) {
	var st sideStart
	err := w.until(ctx, node+" Ready", func() error {
		ready, ok := w.nodes[node]
		if !ok {
			return errors.New("not Ready")
		}
		for _, obj := range w.agents.List() {
			p, _ := obj.(*corev1.Pod)
			if p == nil || p.Spec.NodeName != node || p.Namespace != "kube-system" {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == cni && cs.State.Running != nil {
					st.sinceAgent = ready.Sub(cs.State.Running.StartedAt.Time)
					st.sinceInstall = ready.Sub(installed)
					return nil
				}
				if cs.Name == cni && cs.LastTerminationState.Terminated != nil {
					return fmt.Errorf("%s's container restarted: %s", cni, cs.LastTerminationState.Terminated.Reason)
				}
			}
		}
		return fmt.Errorf("no running %s container", cni)
	})
	return st, err
}
