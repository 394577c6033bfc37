package kubecluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vpcnet/vpcnet/fabric"
)

// APIAddress is where the cluster's API server answers inside the VPC, as
// an EKS cluster endpoint does: an address on the VPC router's loopback
// (TEST-NET-1, never routed on the Internet), which every node reaches
// through its default route and every pod through vpcnet's SNAT. It is
// also the kubernetes Service's endpoint, which kube-proxy translates
// 10.96.0.1:443 to (an IPv6 cluster advertises an IPv6 address beside
// it: family.go).
var APIAddress = netip.MustParseAddrPort("192.0.2.1:6443")

// ServiceCIDR is an IPv4 cluster's ClusterIP range; the kubernetes
// Service is its first address. family.go has the IPv6 cluster's.
const ServiceCIDR = "10.96.0.0/16"

// controlPlane is etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, all in the VPC router's network namespace so that the
// API server reaches each kubelet at its node's address (logs, exec) and
// every node reaches the API server, with nothing in the host's namespace
// but a loopback forwarder for kubectl.
type controlPlane struct {
	dir         string
	cgroup      string // every component's, so teardown finds them by PID
	routerNS    string
	bins        Binaries
	net         network
	kubeconfigs map[string]string
	saPrivate   string
	caFile      string
	hs          []string
	procs       []*process
	fwd         net.Listener
	wg          sync.WaitGroup
}

// files the control plane's components read.
type pkiFiles struct {
	ca                              string
	serving, servingKey             string
	kubeletClient, kubeletClientKey string
	saPublic, saPrivate             string
}

func startControlPlane(ctx context.Context, routerNS, dir, cgroup string, bins Binaries, ca *CA, nw network) (_ *controlPlane, err error) {
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{dir: dir, cgroup: cgroup, hs: hs, routerNS: routerNS, bins: bins, net: nw, kubeconfigs: map[string]string{}}
	defer func() {
		if err != nil {
			cp.stop()
		}
	}()
	if err := makeCgroup(hs, cgroup); err != nil {
		return nil, err
	}
	for _, a := range []netip.Addr{APIAddress.Addr(), nw.Advertise.Addr()} {
		if err := addLoopbackAddr(routerNS, a); err != nil {
			return nil, fmt.Errorf("API server address on the VPC router: %w", err)
		}
	}
	pki := filepath.Join(dir, "pki")
	f := pkiFiles{
		ca: filepath.Join(pki, "ca.crt"), serving: filepath.Join(pki, "apiserver.crt"), servingKey: filepath.Join(pki, "apiserver.key"),
		kubeletClient: filepath.Join(pki, "apiserver-kubelet-client.crt"), kubeletClientKey: filepath.Join(pki, "apiserver-kubelet-client.key"),
		saPublic: filepath.Join(pki, "sa.pub"), saPrivate: filepath.Join(pki, "sa.key"),
	}
	serving, err := ca.Serving("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.IPv4(127, 0, 0, 1), APIAddress.Addr().AsSlice(), nw.Advertise.Addr().AsSlice(), nw.KubernetesService.AsSlice()})
	if err != nil {
		return nil, err
	}
	kubeletClient, err := ca.Client("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return nil, err
	}
	saPub, saKey, err := serviceAccountKey()
	if err != nil {
		return nil, err
	}
	cp.saPrivate, cp.caFile = f.saPrivate, f.ca
	for path, data := range map[string][]byte{
		f.ca: ca.PEM(), f.serving: serving.Cert, f.servingKey: serving.Key,
		f.kubeletClient: kubeletClient.Cert, f.kubeletClientKey: kubeletClient.Key,
		f.saPublic: saPub, f.saPrivate: saKey,
	} {
		if err := writeFile(path, data); err != nil {
			return nil, err
		}
	}
	server := "https://" + APIAddress.String()
	kubeconfigs := cp.kubeconfigs
	for _, c := range []struct{ name, user, group string }{
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
	} {
		id, err := ca.Client(c.user)
		if err != nil {
			return nil, err
		}
		kubeconfigs[c.name] = filepath.Join(dir, c.name+".kubeconfig")
		if err := writeKubeconfig(kubeconfigs[c.name], server, ca.PEM(), id); err != nil {
			return nil, err
		}
	}
	env := cpEnv
	logs := filepath.Join(dir, "logs")
	etcd, err := startProcess(routerNS, filepath.Join(logs, "etcd.log"), env, bins.Etcd,
		"--name=local-cloud", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=local-cloud=http://127.0.0.1:2380",
		"--logger=zap", "--log-outputs=stderr", "--log-level=warn")
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, etcd)
	if err := joinCgroup(hs, cgroup, etcd.PID()); err != nil {
		return nil, err
	}
	apiserver, err := startProcess(routerNS, filepath.Join(logs, "kube-apiserver.log"), env, bins.APIServer,
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address="+nw.BindAddress,
		"--advertise-address="+nw.Advertise.Addr().String(),
		fmt.Sprintf("--secure-port=%d", APIAddress.Port()),
		"--tls-cert-file="+f.serving, "--tls-private-key-file="+f.servingKey,
		"--client-ca-file="+f.ca,
		// As EKS: kubelets are authorized by the Node authorizer and
		// may change only their own Node and its pods.
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate="+f.kubeletClient, "--kubelet-client-key="+f.kubeletClientKey,
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+f.saPublic, "--service-account-signing-key-file="+f.saPrivate,
		"--service-cluster-ip-range="+nw.ServiceCIDR.String(),
		"--allow-privileged=true",
		"--cert-dir="+filepath.Join(dir, "apiserver-certs"))
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, apiserver)
	if err := joinCgroup(hs, cgroup, apiserver.PID()); err != nil {
		return nil, err
	}
	if err := cp.forward(routerNS); err != nil {
		return nil, err
	}
	return cp, nil
}

// startControllers starts kube-controller-manager and kube-scheduler,
// once the API server is ready: before, they fail reading the
// authentication ConfigMap that RBAC's bootstrap has not yet allowed.
func (cp *controlPlane) startControllers() error {
	cm, err := startProcess(cp.routerNS, filepath.Join(cp.dir, "logs", "kube-controller-manager.log"), cpEnv, cp.bins.ControllerManager,
		"--kubeconfig="+cp.kubeconfigs["controller-manager"],
		"--authentication-kubeconfig="+cp.kubeconfigs["controller-manager"],
		"--authorization-kubeconfig="+cp.kubeconfigs["controller-manager"],
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+cp.saPrivate,
		"--root-ca-file="+cp.caFile,
		"--service-cluster-ip-range="+cp.net.ServiceCIDR.String(),
		// vpcnet gives pods VPC addresses: no pod CIDRs per node.
		"--allocate-node-cidrs=false",
		// Without a cloud controller manager nothing else would remove
		// the Node of a terminated instance.
		"--node-monitor-grace-period=20s")
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, cm)
	if err := joinCgroup(cp.hs, cp.cgroup, cm.PID()); err != nil {
		return err
	}
	sched, err := startProcess(cp.routerNS, filepath.Join(cp.dir, "logs", "kube-scheduler.log"), cpEnv, cp.bins.Scheduler,
		"--kubeconfig="+cp.kubeconfigs["scheduler"],
		"--authentication-kubeconfig="+cp.kubeconfigs["scheduler"],
		"--authorization-kubeconfig="+cp.kubeconfigs["scheduler"],
		"--bind-address=127.0.0.1",
		"--leader-elect=false")
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, sched)
	if err := joinCgroup(cp.hs, cp.cgroup, sched.PID()); err != nil {
		return err
	}
	return nil
}

var cpEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}

// forward serves the API server on the host's loopback (a free port) by
// relaying each connection into the router's namespace: kubectl and tests
// in the host's namespace use it; TLS goes end to end.
func (cp *controlPlane) forward(routerNS string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("API server forwarder: %w", err)
	}
	cp.fwd = ln
	cp.wg.Add(1)
	go func() {
		defer cp.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c, routerNS)
		}
	}()
	return nil
}

func relay(c net.Conn, routerNS string) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	up, err := fabric.Dial(ctx, routerNS, "tcp", APIAddress.String())
	cancel()
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// LocalURL is the API server through the host-side forwarder.
func (cp *controlPlane) LocalURL() string { return "https://" + cp.fwd.Addr().String() }

// check fails if a component has exited.
func (cp *controlPlane) check() error {
	for _, p := range cp.procs {
		if ok, _ := p.Exited(); ok {
			return p.exitError()
		}
	}
	return nil
}

func (cp *controlPlane) stop() {
	if cp.fwd != nil {
		cp.fwd.Close()
		cp.wg.Wait()
	}
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].stop(5 * time.Second)
	}
	if cp.cgroup != "" {
		_ = removeCgroup(cp.hs, cp.cgroup)
	}
}

// addLoopbackAddr puts addr (/32 or /128) on the loopback of the
// namespace at nsPath. An IPv4 one is the same address twice on a
// dual-stack router: AddrReplace leaves it once.
func addLoopbackAddr(nsPath string, addr netip.Addr) error {
	h, err := netns.GetFromPath(nsPath)
	if err != nil {
		return err
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		return err
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}}
	if err := nl.AddrReplace(lo, a); err != nil {
		return fmt.Errorf("add %s to lo in %s: %w", addr, nsPath, err)
	}
	return nil
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
