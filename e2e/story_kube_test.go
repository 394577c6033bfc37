package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/internal/kubetest"
	"github.com/vpcnet/vpcnet/simcluster"
)

// The stories that need a Kubernetes API run doctor in the test's own
// namespace: the real kube-apiserver of internal/kubetest listens on its
// loopback, and no node namespace has a link to it (nor does any agent on
// the local cloud talk to an API server). What doctor reads inside the
// node is brought to it instead: the node's IMDS and the EC2 API served
// here from the same emulator, the agent's introspection through a proxy
// that dials into the node. The host doctor reads is then this one's:
// only its host name matters to these stories, and it is the node's too
// (the fabric's namespaces share the machine's UTS namespace).

// kubeDoctor is where doctor reads a node from outside it.
type kubeDoctor struct {
	kubeconfig string
	imds       string
	ec2        string
	agent      string
}

// nodeFromOutside serves node n's IMDS (with role as its instance role,
// which the local cloud's IMDS does not serve; "" for none), the EC2 API
// and the agent's introspection on this namespace's loopback, and writes
// a kubeconfig for kube's admin.
func nodeFromOutside(t *testing.T, c *simcluster.Cluster, n *simcluster.Node, kube *kubetest.Cluster, role string) kubeDoctor {
	t.Helper()
	inner := c.Cloud.IMDSHandler(n.ID)
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if role != "" && r.URL.Path == "/latest/meta-data/iam/security-credentials/" {
			// Only the token check of the real handler matters here.
			rec := httptest.NewRecorder()
			probe := r.Clone(r.Context())
			probe.URL.Path = "/latest/meta-data/instance-id"
			inner.ServeHTTP(rec, probe)
			if rec.Code != http.StatusOK {
				w.WriteHeader(rec.Code)
				return
			}
			w.Write([]byte(role))
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(imds.Close)
	ec2 := httptest.NewServer(c.Cloud.EC2Handler())
	t.Cleanup(ec2.Close)
	target, _ := url.Parse("http://127.0.0.1:61679")
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return fabric.Dial(ctx, n.NetNS, network, addr)
	}}
	agent := httptest.NewServer(proxy)
	t.Cleanup(agent.Close)

	rc := kube.AdminConfig()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin"}
	cfg.CurrentContext = "kubetest"
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	return kubeDoctor{kubeconfig: kc, imds: imds.URL, ec2: ec2.URL, agent: agent.URL}
}

// run runs the built vpcnetctl doctor here, against node n's files and
// the endpoints of k.
func (k kubeDoctor) run(t *testing.T, n *simcluster.Node, extra ...string) doctorResult {
	t.Helper()
	args := append([]string{"doctor", "-o", "json", "--timeout", "45s",
		"--agent", k.agent, "--kubeconfig", k.kubeconfig,
		"--imds-endpoint", k.imds, "--ec2-endpoint", k.ec2,
		"--state-dir", filepath.Join(n.Dir, "lib"),
		"--cni-conf-dir", n.ConfDir(), "--cni-bin-dir", binDir,
		"--aws-node-checkpoint", filepath.Join(n.Dir, "aws-node", "ipam.json"),
		"--kubelet-log", "",
	}, extra...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "vpcnetctl"), args...)
	cmd.Env = []string{"AWS_ACCESS_KEY_ID=sim", "AWS_SECRET_ACCESS_KEY=sim", "HOME=/nonexistent"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := doctorResult{out: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("vpcnetctl doctor: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &res.report); err != nil {
		t.Fatalf("vpcnetctl doctor -o json (exit %d) printed no report: %v\n%s%s", res.code, err, stdout.String(), stderr.String())
	}
	for _, s := range res.report.Sources {
		if !s.OK && s.Name != doctor.SourceHost && !strings.HasPrefix(s.Detail, "not read") {
			t.Logf("doctor could not read %s: %s", s.Name, s.Detail)
		}
	}
	return res
}
