package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster/kubecluster"
)

// The cold burst runs, when an API server is given (--kube-apiserver), as
// on a node of a cluster: etcd and kube-apiserver in the VPC router's
// namespace, the agent watching its Node and its pods, and every pod of
// the burst bound to the node in the API server just before its ADD, as
// the scheduler binds a pod before kubelet starts its sandbox. No kubelet
// runs: the driver is the kubelet, as in every scenario.

// burstNamespace holds the burst's pods.
const burstNamespace = "burst"

// startKubeNode is startNode with an API server the agent uses.
func (b *bench) startKubeNode(ctx context.Context, spec clusterSpec) (*node, error) {
	nodes, err := b.startKubeNodes(ctx, spec)
	if err != nil {
		return nil, err
	}
	return nodes[0], nil
}

// startKubeNodes starts the local cloud with spec.nodes nodes, every
// agent using one API server; close on the first closes them all.
func (b *bench) startKubeNodes(ctx context.Context, spec clusterSpec) ([]*node, error) {
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("an API server needs etcd (apt-get install etcd-server): %w", err)
	}
	sim, dir, prefix, err := b.simOptions(spec)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	kc, err := kubecluster.Start(ctx, kubecluster.Options{
		Sim: sim, Bins: kubecluster.Binaries{Etcd: etcd, APIServer: b.opts.apiserver},
		ControlPlaneOnly: true, Logger: b.log.With("scenario", spec.name),
	})
	if err != nil {
		return nil, fmt.Errorf("start the local cloud with an API server: %w", err)
	}
	cfg := restclient.CopyConfig(kc.Config)
	// The scheduler binds a burst's pods at its own pace; the client's
	// default 5 requests a second would make the driver the bottleneck.
	cfg.QPS, cfg.Burst = -1, 0
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		kc.Close()
		return nil, err
	}
	var nodes []*node
	for _, n := range kc.Sim.Nodes {
		nodes = append(nodes, &node{c: kc.Sim, n: n, prefix: prefix, dir: dir, started: started, kube: kc, kubeClient: client})
	}
	return nodes, nil
}

// registerNode makes the node's Node, as kubelet registers it, and waits
// until the agent has found it and watches its pods: a pod bound to the
// node shows in the agent's status.
func (nd *node) registerNode(ctx context.Context) error {
	if err := nd.createNode(ctx); err != nil {
		return err
	}
	k := nd.kubeClient
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: burstNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", burstNamespace, err)
	}
	// Pods need their service account; with no controller manager here,
	// the driver makes it.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: burstNamespace}}
	if _, err := k.CoreV1().ServiceAccounts(burstNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service account %s/default: %w", burstNamespace, err)
	}
	probe := burstPod("watch-probe", nd.nodeName)
	probe.Spec.HostNetwork = true // needs no address: changes no plan
	if _, err := k.CoreV1().Pods(burstNamespace).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %w", probe.Name, err)
	}
	return nd.waitFound(ctx, 1)
}

// createNode makes the node's Node as kubelet registers it: named by the
// instance's private DNS name, with its provider ID.
func (nd *node) createNode(ctx context.Context) error {
	var in *sim.InstanceInfo
	for _, i := range nd.c.Cloud.Instances() {
		if i.ID == nd.n.ID {
			in = &i
		}
	}
	if in == nil {
		return fmt.Errorf("no instance %s in the local cloud", nd.n.ID)
	}
	name := kubecluster.PrivateDNSName("us-west-2", in.PrivateIP.String())
	if _, err := nd.kubeClient.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/%s", in.AZ, in.ID)},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Node %s: %w", name, err)
	}
	nd.nodeName = name
	return nil
}

// waitFound waits until the agent has found its Node and knows of at
// least pods of the pods bound to it.
func (nd *node) waitFound(ctx context.Context, pods int) error {
	deadline := time.Now().Add(time.Minute)
	var st struct {
		Kubernetes introspect.KubeState `json:"kubernetes"`
	}
	for {
		body, err := nd.n.Get(ctx, "/v1/status")
		if err == nil {
			err = json.Unmarshal(body, &st)
		}
		if err == nil && st.Kubernetes.Node == nd.nodeName && st.Kubernetes.Pods >= pods {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent did not find Node %s and its pods within a minute: %+v (%v)", nd.nodeName, st.Kubernetes, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// bindAll creates the pods in the API server bound to the node, several
// at a time as the scheduler binds them, and says how long that took.
func (nd *node) bindAll(ctx context.Context, pods []*pod) (time.Duration, error) {
	start := time.Now()
	errs := make([]error, len(pods))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, p := range pods {
		p.namespace = burstNamespace
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := nd.kubeClient.CoreV1().Pods(burstNamespace).Create(ctx, burstPod(p.name, nd.nodeName), metav1.CreateOptions{})
			if err != nil {
				errs[i] = fmt.Errorf("bind pod %s/%s to %s: %w", burstNamespace, p.name, nd.nodeName, err)
			}
		})
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

func burstPod(name, nodeName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: burstNamespace},
		Spec: corev1.PodSpec{NodeName: nodeName,
			Containers: []corev1.Container{{Name: "pause", Image: kubecluster.PauseImage}}},
	}
}
