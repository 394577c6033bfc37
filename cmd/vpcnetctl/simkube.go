package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vpcnet/vpcnet/simcluster"
	"github.com/vpcnet/vpcnet/simcluster/kubecluster"
)

// kubeUp waits, for `sim up --kubernetes`, until the background process
// has written the admin kubeconfig and every node's Node is Ready (which
// the kubelet reports only once vpcnetd has written its CNI
// configuration), then says how to use the cluster.
func kubeUp(ctx context.Context, c *simcluster.Cluster, state string, exited <-chan error, stdout io.Writer) error {
	kubeconfig := filepath.Join(state, "kubeconfig")
	logPath := filepath.Join(state, "sim.log")
	var ready map[string]string
	for {
		ready = nodesReady(ctx, kubeconfig)
		if len(ready) >= len(c.Nodes) {
			break
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the local cloud stopped (%v); the end of its log %s:\n%s", err, logPath, tailFile(logPath, 15))
		case <-ctx.Done():
			return fmt.Errorf("the Kubernetes nodes are not Ready (%d of %d): %w; its log is %s, the nodes' logs are under %s; remove it with `%s`",
				len(ready), len(c.Nodes), ctx.Err(), logPath, filepath.Join(state, "kube"), simCmd(state, "down"))
		case <-time.After(time.Second):
		}
	}
	fmt.Fprintf(stdout, "local cloud and Kubernetes up (state %s, log %s)\n", state, logPath)
	for _, n := range c.Nodes {
		fmt.Fprintf(stdout, "  %-10s %-44s %-12s Ready\n", n.ID, ready[n.ID], n.PrimaryIP)
	}
	fmt.Fprintf(stdout, "next: export KUBECONFIG=%s; kubectl get nodes -o wide; %s\n", kubeconfig, simCmd(state, "down"))
	return nil
}

// nodesReady maps instance ID to Node name for every Ready Node; nil while
// the API server is not up yet.
func nodesReady(ctx context.Context, kubeconfig string) map[string]string {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for i := range list.Items {
		n := &list.Items[i]
		if kubecluster.NodeReady(n) {
			out[filepath.Base(n.Spec.ProviderID)] = n.Name
		}
	}
	return out
}
