package kubetest

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
)

// startEtcd runs a single-member etcd on loopback and returns its client URL.
func startEtcd(dir, bin string) (*process, string, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := startProcess("etcd", dir, bin,
		"--name=kubetest",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kubetest="+peer,
		"--logger=zap",
		"--log-outputs=stderr",
		"--log-level=warn",
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
	)
	return p, client, err
}

func apiserverArgs(port int, etcd string, f files) []string {
	return []string{
		"--etcd-servers=" + etcd,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + f.servingCert,
		"--tls-private-key-file=" + f.servingKey,
		"--client-ca-file=" + f.ca,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f.saPublic,
		"--service-account-signing-key-file=" + f.saPrivate,
		"--service-cluster-ip-range=10.96.0.0/16",
		// Without kube-controller-manager nobody would keep a loopback
		// endpoint for the kubernetes Service valid; tests do not use it.
		"--endpoint-reconciler-type=none",
		// The agent runs privileged; tests may create its pods.
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(filepath.Dir(f.ca), "certs"),
	}
}

// waitReady polls /readyz until it answers ok, failing fast if either
// server exits.
func (c *Cluster) waitReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return fmt.Errorf("readiness client: %w", err)
	}
	client := cs.Discovery().RESTClient()
	start := time.Now()
	var last error
	for {
		for _, p := range []*process{c.etcd, c.apiserver} {
			if ok, _ := p.exited(); ok {
				return p.exitError()
			}
		}
		body, err := client.Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver at %s not ready after %v (last /readyz error: %v); last lines of %s:\n%s",
				c.host, time.Since(start).Round(time.Second), last, c.apiserver.log, c.apiserver.tail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
