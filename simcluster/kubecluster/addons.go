package kubecluster

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"net/netip"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/internal/kubetest"
)

// The cluster's add-ons, as kubeadm and EKS install them: kube-proxy as a
// DaemonSet and CoreDNS as a Deployment behind the kube-dns Service.
//
//go:embed addons/kube-proxy.yaml addons/coredns.yaml
var addons embed.FS

// Images of the add-ons, built from the programs hack/kube-build.sh builds.
const (
	KubeProxyImage = "vpcnet.local/kube-proxy:local"
	CoreDNSImage   = "vpcnet.local/coredns:local"
)

// ClusterDNS is an IPv4 cluster's kube-dns Service address, the tenth of
// ServiceCIDR as kubeadm chooses it; every kubelet gives it to
// ClusterFirst pods. An IPv6 cluster's is the tenth of its range
// (family.go).
const ClusterDNS = "10.96.0.10"

// installAddons applies kube-proxy's DaemonSet and CoreDNS's Deployment.
// kube-proxy runs on the host network, so it starts while the nodes wait
// for a pod network; CoreDNS's pods start once vpcnet is ready.
func (c *Cluster) installAddons(ctx context.Context) error {
	for _, f := range []string{"addons/kube-proxy.yaml", "addons/coredns.yaml"} {
		data, err := addonManifest(f, c.net)
		if err != nil {
			return err
		}
		c.log.Info("installing add-on", "manifest", f, "family", c.net.Family)
		if err := kubetest.Apply(ctx, c.Config, data); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// addonManifest is an add-on's manifest for the cluster's network: the
// files are templates of its addresses.
func addonManifest(name string, nw network) ([]byte, error) {
	t, err := template.ParseFS(addons, name)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, nw); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b.Bytes(), nil
}

// WaitAddonsReady waits until kube-proxy runs on every node and every
// CoreDNS replica is ready: until then Services and DNS names do not
// work everywhere.
func (c *Cluster) WaitAddonsReady(ctx context.Context) error {
	for {
		ds, err := c.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		proxyOK := err == nil && ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled
		dep, err := c.Client.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		dnsOK := err == nil && dep.Spec.Replicas != nil && dep.Status.ReadyReplicas == *dep.Spec.Replicas
		if proxyOK && dnsOK {
			return nil
		}
		if err := c.checkNodes(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("add-ons not ready (kube-proxy ready on every node: %v, CoreDNS ready: %v): %w\n%s", proxyOK, dnsOK, ctx.Err(), c.podSummary(context.Background(), "kube-system"))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// podSummary is one line per pod of a namespace: phase, node, and why a
// container is waiting.
func (c *Cluster) podSummary(ctx context.Context, ns string) string {
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	out := ""
	for _, p := range list.Items {
		why := ""
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Waiting != nil {
				why += fmt.Sprintf(" %s: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
			}
		}
		if p.Status.Phase == corev1.PodPending && why == "" {
			for _, cond := range p.Status.Conditions {
				if cond.Status != corev1.ConditionTrue && cond.Message != "" {
					why += " " + cond.Message
				}
			}
		}
		out += fmt.Sprintf("  %s %s on %s%s\n", p.Name, p.Status.Phase, p.Spec.NodeName, why)
	}
	return out
}

// vpcResolver is the VPC's DNS resolver address: its first CIDR's base
// address plus two (AmazonProvidedDNS).
func vpcResolver(cidrs []string) (netip.Addr, error) {
	if len(cidrs) == 0 {
		return netip.Addr{}, fmt.Errorf("the topology's VPC has no CIDR")
	}
	p, err := netip.ParsePrefix(cidrs[0])
	if err != nil {
		return netip.Addr{}, fmt.Errorf("VPC CIDR %q: %w", cidrs[0], err)
	}
	return p.Masked().Addr().Next().Next(), nil
}

// kubeProxyRootfs is kube-proxy's image: the program and Debian's nft,
// which kube-proxy's nftables mode runs (knftables) to program rules.
func kubeProxyRootfs(kubeProxy string) (*rootfs, imageConfig, error) {
	r := newRootfs()
	if err := r.copyFile(kubeProxy, "/usr/local/bin/kube-proxy"); err != nil {
		return nil, imageConfig{}, err
	}
	if err := r.program("/usr/sbin/nft", "nftables"); err != nil {
		return nil, imageConfig{}, err
	}
	r.accounts([]string{"root:x:0:0:root:/root:/sbin/nologin"}, []string{"root:x:0:"})
	return r, imageConfig{Entrypoint: []string{"/usr/local/bin/kube-proxy"}}, nil
}

// coreDNSRootfs is CoreDNS's image: the one static program.
func coreDNSRootfs(coredns string) (*rootfs, imageConfig, error) {
	r := newRootfs()
	if err := r.copyFile(coredns, "/coredns"); err != nil {
		return nil, imageConfig{}, err
	}
	r.accounts([]string{"root:x:0:0:root:/root:/sbin/nologin", "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"}, []string{"root:x:0:", "nonroot:x:65532:"})
	return r, imageConfig{Entrypoint: []string{"/coredns"}}, nil
}
