// Package kubecluster runs a real Kubernetes cluster on the local cloud:
// a control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) in the VPC router's namespace, and in each node's
// namespace, in a private mount namespace and a cgroup of its own,
// containerd and a kubelet, with kube-proxy (nftables mode) as a DaemonSet
// and CoreDNS as a Deployment, as kubeadm and EKS install them. Nodes are
// identified as on EC2 (Node name = PrivateDnsName, providerID
// aws:///AZ/INSTANCE, a client certificate for system:node:NAME from the
// cluster's CA, Node authorizer and NodeRestriction), images are built
// from source without a registry and imported into each containerd, and
// vpcnet is installed from deploy/vpcnet.yaml with only its image, the
// local cloud's EC2 endpoint and credentials changed.
//
// The programs come from hack/kube-build.sh (built from the Go module
// proxy, cached); `make kube-bins` links them into bin/kube.
package kubecluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vpcnet/vpcnet/internal/kubetest"
	"github.com/vpcnet/vpcnet/simcluster"
)

// Binaries are the programs a cluster runs.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler string
	Kubelet, KubeProxy, Containerd, Shim, Ctr     string
	CoreDNS                                       string
	Runc                                          string
}

// BinariesIn finds the Kubernetes and containerd programs in dir (named
// as hack/kube-build.sh names them), etcd and runc on PATH (Debian's
// etcd-server and runc).
func BinariesIn(dir string) (Binaries, error) {
	b := Binaries{
		APIServer: filepath.Join(dir, "kube-apiserver"), ControllerManager: filepath.Join(dir, "kube-controller-manager"),
		Scheduler: filepath.Join(dir, "kube-scheduler"), Kubelet: filepath.Join(dir, "kubelet"),
		KubeProxy: filepath.Join(dir, "kube-proxy"), Containerd: filepath.Join(dir, "containerd"),
		Shim: filepath.Join(dir, "containerd-shim-runc-v2"), Ctr: filepath.Join(dir, "ctr"),
		CoreDNS: filepath.Join(dir, "coredns"),
	}
	var errs []error
	for _, p := range []string{b.APIServer, b.ControllerManager, b.Scheduler, b.Kubelet, b.KubeProxy, b.Containerd, b.Shim, b.Ctr, b.CoreDNS} {
		if _, err := os.Stat(p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	if len(errs) > 0 {
		return b, fmt.Errorf("kubernetes programs missing (run `make kube-bins`, which builds them from the Go module proxy once and caches them): %w", errors.Join(errs...))
	}
	var err error
	if b.Etcd, err = exec.LookPath("etcd"); err != nil {
		return b, fmt.Errorf("etcd not found (apt-get install etcd-server): %w", err)
	}
	if b.Runc, err = exec.LookPath("runc"); err != nil {
		return b, fmt.Errorf("runc not found (apt-get install runc): %w", err)
	}
	return b, nil
}

// NodeOptions change one node from what EC2 would give it.
type NodeOptions struct {
	// Name registers the Node under this name instead of the instance's
	// PrivateDnsName (a custom hostname; story 6). Its certificate is for
	// system:node:Name, so NodeRestriction lets it in.
	Name string
	// UntrustedCredential gives the kubelet a certificate from a CA the
	// cluster does not trust: its requests are refused and no Node
	// appears (story 7).
	UntrustedCredential bool
	// Labels are registered by the kubelet (--node-labels), as a node
	// group's launch template sets them; a DaemonSet installed with
	// InstallVpcnetOn or InstallAWSNodeOn selects nodes by them.
	Labels map[string]string
}

// Options describe a cluster.
type Options struct {
	// Sim is the local cloud; its NoAgents is set (the agents are the
	// DaemonSet's pods).
	Sim simcluster.Options
	// Bins are the programs; RepoRoot is this repository (deploy/ and the
	// test programs' sources).
	Bins     Binaries
	RepoRoot string
	// Nodes change single nodes, by instance ID.
	Nodes map[string]NodeOptions
	// StartupTaint, if set, is registered by every kubelet with effect
	// NoSchedule and given to vpcnet as VPCNET_STARTUP_TAINT.
	StartupTaint string
	// AgentEnv adds settings to the vpcnet container (KEY=VALUE).
	AgentEnv []string
	// SkipVpcnet starts the cluster without installing vpcnet.
	SkipVpcnet bool
	// AWSNode, when set, also builds the Amazon VPC CNI's images from the
	// programs in AWSNode.Dir and imports them into every node, for
	// InstallAWSNode (a switch-over starts from aws-node).
	AWSNode *AWSNode
	// E2E, when set, also builds the images Kubernetes' e2e tests run
	// (E2EImageRefs) and imports them into every node.
	E2E *E2EImages
	// Family is the cluster's IP family: IPv4 (the default, "" too) or
	// IPv6, single-stack either way (family.go says what changes).
	Family Family
	// ControlPlaneOnly runs etcd and kube-apiserver and no kubelet: the
	// local cloud's own agents (simcluster's, not the DaemonSet's) use
	// the API server through VPCKubeconfig, and the caller makes the
	// Nodes and binds pods to them itself. The benchmarks use it to give
	// the agents what they watch in a cluster without kubelets competing
	// for the CPU. Only Bins.Etcd and Bins.APIServer are needed.
	ControlPlaneOnly bool
	Logger           *slog.Logger
}

// E2EImages are the e2e tests' images to build: their names (as
// E2EImageRefs lists them) and what they are built from.
type E2EImages struct {
	Refs     []string
	Programs E2EPrograms
	// Unbuilt receives the names no recipe builds: a test that runs one
	// fails with ErrImagePull, and the conformance report says why.
	Unbuilt []string
}

// Cluster is a running Kubernetes cluster on the local cloud.
type Cluster struct {
	Sim        *simcluster.Cluster
	Kubeconfig string // admin kubeconfig, through the host-side forwarder
	// VPCKubeconfig is the admin kubeconfig for programs inside a node's
	// namespace: it names the API server's VPC address.
	VPCKubeconfig string
	Config        *rest.Config
	Client        kubernetes.Interface

	opts  Options
	net   network
	dir   string
	cp    *controlPlane
	nodes []*nodeRuntime
	log   *slog.Logger
	// NodeNames maps instance ID to the Node's name.
	NodeNames map[string]string
}

// Start runs the local cloud, the control plane and every node, installs
// vpcnet (unless SkipVpcnet) and returns once every node with a trusted
// credential has registered. It does not wait for Ready: see WaitNodesReady.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts.Sim.NoAgents = !opts.ControlPlaneOnly
	opts.Sim.Logger = opts.Logger
	nw, err := networkOf(opts.Family)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, net: nw, log: opts.Logger, NodeNames: map[string]string{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	if opts.Sim.StateDir == "" {
		return nil, errors.New("kubecluster: Sim.StateDir is required")
	}
	c.dir = filepath.Join(opts.Sim.StateDir, "kube")
	if err := os.RemoveAll(c.dir); err != nil {
		return nil, fmt.Errorf("remove the Kubernetes state an earlier cluster left: %w", err)
	}
	ca, err := NewCA(time.Now())
	if err != nil {
		return nil, err
	}
	admin, err := ca.Client("local-cloud-admin", "system:masters")
	if err != nil {
		return nil, err
	}
	// Written before the agents start, which read it then and wait out
	// an API server not up yet.
	c.VPCKubeconfig = filepath.Join(c.dir, "admin-vpc.kubeconfig")
	if err := writeKubeconfig(c.VPCKubeconfig, "https://"+APIAddress.String(), ca.PEM(), admin); err != nil {
		return nil, err
	}
	if opts.ControlPlaneOnly {
		opts.Sim.AgentEnv = append(slices.Clone(opts.Sim.AgentEnv), "VPCNET_KUBECONFIG="+c.VPCKubeconfig)
	}
	if c.Sim, err = simcluster.Start(ctx, opts.Sim); err != nil {
		return nil, err
	}
	st := c.Sim.State()
	c.log.Info("starting the control plane in the VPC router's namespace")
	base := "/" + strings.TrimSuffix(st.Prefix, "-")
	if err := recordCgroup(st.StateDir, base+"-control-plane"); err != nil {
		return nil, err
	}
	if c.cp, err = startControlPlane(ctx, c.Sim.Fabric.RouterNS(), filepath.Join(c.dir, "control-plane"), base+"-control-plane", opts.Bins, ca, nw); err != nil {
		return nil, err
	}
	resolver, err := vpcResolver(opts.Sim.Topology.VPC.CIDRs)
	if err != nil {
		return nil, err
	}
	if !opts.ControlPlaneOnly {
		if err := c.cp.startVPCResolver(resolver, opts.Sim.Topology.Region); err != nil {
			return nil, err
		}
	}
	c.Kubeconfig = filepath.Join(st.StateDir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.cp.LocalURL(), ca.PEM(), admin); err != nil {
		return nil, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, err
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	if err := c.waitAPI(ctx); err != nil {
		return nil, err
	}
	if opts.ControlPlaneOnly {
		return c, nil
	}
	if err := c.cp.startControllers(); err != nil {
		return nil, err
	}
	c.log.Info("building images", "dir", filepath.Join(c.dir, "images"))
	archives, err := buildImages(ctx, filepath.Join(c.dir, "images"), opts.Sim.BinDir, opts.RepoRoot, opts.Bins)
	if err != nil {
		return nil, err
	}
	imports := []string{archives[PauseImage], archives[TestImage], archives[VpcnetImage], archives[KubeProxyImage], archives[CoreDNSImage]}
	if opts.AWSNode != nil {
		aws, err := buildAWSNodeImages(filepath.Join(c.dir, "images"), opts.AWSNode.Dir)
		if err != nil {
			return nil, err
		}
		imports = append(imports, aws...)
	}
	if opts.E2E != nil {
		c.log.Info("building the e2e tests' images", "images", len(opts.E2E.Refs))
		e2e, unbuilt, err := buildE2EImages(filepath.Join(c.dir, "images"), opts.E2E.Refs, opts.E2E.Programs, filepath.Join(c.dir, "images", "bin", "pause"))
		if err != nil {
			return nil, err
		}
		opts.E2E.Unbuilt = unbuilt
		imports = append(imports, e2e...)
	}
	region := opts.Sim.Topology.Region
	var want []string
	for i, in := range c.Sim.Cloud.Instances() {
		n, err := c.Sim.Node(in.ID)
		if err != nil {
			continue // not running
		}
		no := opts.Nodes[in.ID]
		var ipv6 []netip.Addr
		if ifs, err := c.Sim.Cloud.Interfaces(in.ID); err == nil {
			for _, i := range ifs {
				if i.ID == in.PrimaryENI {
					ipv6 = i.IPv6Addresses
				}
			}
		}
		nodeIP, err := nw.nodeIP(in.PrivateIP, ipv6)
		if err != nil {
			return nil, fmt.Errorf("instance %s: %w", in.ID, err)
		}
		name := PrivateDNSName(region, in.PrivateIP.String())
		if no.Name != "" {
			name = no.Name
		}
		c.NodeNames[in.ID] = name
		signer := ca
		if no.UntrustedCredential {
			if signer, err = NewCA(time.Now()); err != nil {
				return nil, err
			}
		} else {
			want = append(want, name)
		}
		id, err := signer.Client("system:node:"+name, "system:nodes")
		if err != nil {
			return nil, err
		}
		spec := nodeSpec{
			ID: in.ID, Name: name, AZ: in.AZ, NetNS: n.NetNS, IP: nodeIP, ClusterDNS: nw.ClusterDNS,
			Dir:      filepath.Join(c.dir, in.ID),
			Cgroup:   fmt.Sprintf("%s-node%d", base, i),
			Identity: id, CA: ca.PEM(), Bins: opts.Bins, Resolver: resolver,
		}
		if opts.StartupTaint != "" {
			spec.Taints = []string{opts.StartupTaint + ":NoSchedule"}
		}
		for _, k := range slices.Sorted(maps.Keys(no.Labels)) {
			spec.Labels = append(spec.Labels, k+"="+no.Labels[k])
		}
		if err := recordCgroup(st.StateDir, spec.Cgroup); err != nil {
			return nil, err
		}
		c.log.Info("starting node", "instance", in.ID, "node", name, "cgroup", spec.Cgroup)
		rt, err := startNode(ctx, spec, PauseImage)
		if rt != nil {
			c.nodes = append(c.nodes, rt)
		}
		if err != nil {
			return nil, err
		}
		for _, archive := range imports {
			if err := rt.importImage(ctx, archive); err != nil {
				return nil, err
			}
		}
	}
	if err := c.waitNodes(ctx, want); err != nil {
		return nil, err
	}
	if err := c.installAddons(ctx); err != nil {
		return nil, err
	}
	if !opts.SkipVpcnet {
		if err := c.InstallVpcnet(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// PrivateDNSName is EC2's private DNS name for an address in a region
// (outside us-east-1): the name an EKS node registers under.
func PrivateDNSName(region, ip string) string {
	return "ip-" + strings.ReplaceAll(ip, ".", "-") + "." + region + ".compute.internal"
}

func (c *Cluster) waitAPI(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		if err := c.cp.check(); err != nil {
			return err
		}
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready (last /readyz error: %v): %w\n%s", last, ctx.Err(), c.cp.procs[1].tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitNodes waits until a Node with each name exists.
func (c *Cluster) waitNodes(ctx context.Context, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		missing := slices.Clone(names)
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, n := range list.Items {
				missing = slices.DeleteFunc(missing, func(s string) bool { return s == n.Name })
			}
			if len(missing) == 0 {
				return nil
			}
		}
		if err := c.checkNodes(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes %v did not register: %w\n%s", missing, ctx.Err(), c.diagnose())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// WaitNodesReady waits until every named Node reports Ready.
func (c *Cluster) WaitNodesReady(ctx context.Context, names ...string) error {
	for {
		notReady := []string{}
		for _, name := range names {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !NodeReady(n) {
				notReady = append(notReady, name)
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		if err := c.checkNodes(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes %v not Ready: %w\n%s", notReady, ctx.Err(), c.diagnose())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// NodeReady says whether the Node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *Cluster) checkNodes() error {
	for _, n := range c.nodes {
		if ok, _ := n.shell.Exited(); ok {
			return fmt.Errorf("node %s: %w\nkubelet:\n%s", n.spec.ID, n.shell.exitError(), tailFile(filepath.Join(n.spec.Dir, "logs", "kubelet.log"), 20))
		}
	}
	return c.cp.check()
}

// diagnose is the end of every node's kubelet log.
func (c *Cluster) diagnose() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "--- %s kubelet (%s):\n%s\n", n.spec.ID, filepath.Join(n.spec.Dir, "logs", "kubelet.log"),
			tailFile(filepath.Join(n.spec.Dir, "logs", "kubelet.log"), 15))
	}
	return b.String()
}

// NodeDir is the directory of an instance's node (logs/, configuration,
// and root/ with the directories bound over the host paths).
func (c *Cluster) NodeDir(id string) string { return filepath.Join(c.dir, id) }

// InstallVpcnet applies deploy/vpcnet.yaml as an operator would, changing
// only the image (built here, imported into every node), the local
// cloud's EC2 endpoint and credentials, plus AgentEnv and the startup
// taint when set.
func (c *Cluster) InstallVpcnet(ctx context.Context) error { return c.InstallVpcnetOn(ctx, nil) }

// InstallVpcnetOn is InstallVpcnet with the DaemonSet's pods kept to the
// nodes carrying every label of nodeSelector (all nodes when empty), as
// an operator runs two CNIs side by side on node groups of one cluster.
func (c *Cluster) InstallVpcnetOn(ctx context.Context, nodeSelector map[string]string) error {
	manifest, err := os.ReadFile(filepath.Join(c.opts.RepoRoot, "deploy", "vpcnet.yaml"))
	if err != nil {
		return err
	}
	env := []string{
		"VPCNET_EC2_ENDPOINT=http://127.0.0.1:8780",
		"AWS_ACCESS_KEY_ID=local-cloud", "AWS_SECRET_ACCESS_KEY=local-cloud",
	}
	env = append(env, c.net.AgentEnv...)
	if c.opts.StartupTaint != "" {
		env = append(env, "VPCNET_STARTUP_TAINT="+c.opts.StartupTaint)
	}
	out, err := LocalManifest(manifest, append(env, c.opts.AgentEnv...))
	if err != nil {
		return err
	}
	if out, err = selectNodes(out, "vpcnet", nodeSelector); err != nil {
		return err
	}
	c.log.Info("installing vpcnet from deploy/vpcnet.yaml", "image", VpcnetImage)
	return kubetest.Apply(ctx, c.Config, out)
}

// LocalManifest is deploy/vpcnet.yaml for the local cloud: every
// container of the vpcnet DaemonSet and of the vpcnet-budget Deployment
// uses VpcnetImage, and the agent's container gets env (KEY=VALUE) added.
// Nothing else changes.
func LocalManifest(manifest []byte, env []string) ([]byte, error) {
	found := false
	out, err := editObjects(manifest, func(o *unstructured.Unstructured) error {
		switch {
		case o.GetKind() == "DaemonSet" && o.GetName() == "vpcnet":
			found = true
			return localDaemonSet(o, env)
		case o.GetKind() == "Deployment" && o.GetName() == "vpcnet-budget":
			return localDaemonSet(o, nil)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("deploy/vpcnet.yaml has no DaemonSet named vpcnet")
	}
	return out, nil
}

func localDaemonSet(o *unstructured.Unstructured, env []string) error {
	for _, field := range []string{"initContainers", "containers"} {
		list, found, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		for i, item := range list {
			ctr, ok := item.(map[string]any)
			if !ok {
				return fmt.Errorf("%s %s[%d] is not an object", o.GetKind(), field, i)
			}
			ctr["image"] = VpcnetImage
			if field == "containers" && ctr["name"] == "vpcnet" {
				existing, _ := ctr["env"].([]any)
				for _, kv := range env {
					k, v, _ := strings.Cut(kv, "=")
					existing = append(existing, map[string]any{"name": k, "value": v})
				}
				ctr["env"] = existing
			}
			list[i] = ctr
		}
		if err := unstructured.SetNestedSlice(o.Object, list, "spec", "template", "spec", field); err != nil {
			return err
		}
	}
	return nil
}

// selectNodes adds nodeSelector to the DaemonSet named name in the
// manifest (one JSON object a line, as LocalManifest writes it).
func selectNodes(manifest []byte, name string, nodeSelector map[string]string) ([]byte, error) {
	if len(nodeSelector) == 0 {
		return manifest, nil
	}
	return editObjects(manifest, func(o *unstructured.Unstructured) error {
		if o.GetKind() != "DaemonSet" || o.GetName() != name {
			return nil
		}
		sel, _, err := unstructured.NestedStringMap(o.Object, "spec", "template", "spec", "nodeSelector")
		if err != nil {
			return err
		}
		if sel == nil {
			sel = map[string]string{}
		}
		maps.Copy(sel, nodeSelector)
		return unstructured.SetNestedStringMap(o.Object, sel, "spec", "template", "spec", "nodeSelector")
	})
}

// editObjects decodes a manifest, lets edit change each object, and
// writes them back one JSON object a line.
func editObjects(manifest []byte, edit func(*unstructured.Unstructured) error) ([]byte, error) {
	objs, err := kubetest.Decode(manifest)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, o := range objs {
		if err := edit(o); err != nil {
			return nil, err
		}
		b, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		out = append(append(out, b...), '\n')
	}
	return out, nil
}

// NodePIDs lists the processes running on the node instanceID (its
// kubelet, containerd and every container's), found in the node's own
// cgroup.
func (c *Cluster) NodePIDs(instanceID string) ([]int, error) {
	for _, n := range c.nodes {
		if n.spec.ID == instanceID {
			return cgroupPIDs(n.hs, n.spec.Cgroup), nil
		}
	}
	return nil, fmt.Errorf("kubecluster: no node %s runs in this cluster", instanceID)
}

// Close stops every node (processes by PID from each node's cgroup, its
// mount namespace with them, its cgroups), the control plane, and the
// local cloud. Safe on a partly started cluster.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.nodes {
		if err := n.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.cp != nil {
		c.cp.stop()
	}
	if c.Sim != nil {
		st := c.Sim.State()
		errs = append(errs, c.Sim.Close())
		// Whatever the orderly stop missed; then the record goes.
		if _, err := RemoveLeftovers(st.StateDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
