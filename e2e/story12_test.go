package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/simcluster"
)

// imdsGet asks IMDS for path with a session token, over a connection
// made in namespace netns: what a process there (a pod) could read.
func imdsGet(ctx context.Context, netns, path string) (string, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return fabric.Dial(ctx, netns, network, addr)
		},
		DisableKeepAlives: true,
	}}
	do := func(method, url, header, value string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return "", err
		}
		req.Header.Set(header, value)
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", &httpError{resp.Status}
		}
		return string(b), err
	}
	tok, err := do(http.MethodPut, "http://169.254.169.254/latest/api/token", "X-aws-ec2-metadata-token-ttl-seconds", "60")
	if err != nil {
		return "", err
	}
	return do(http.MethodGet, "http://169.254.169.254/latest/meta-data/"+path, "X-aws-ec2-metadata-token", tok)
}

type httpError struct{ status string }

func (e *httpError) Error() string { return e.status }

// imdsV1 serves the node's IMDS inside its namespace as an instance with
// HttpTokens=optional does: a GET without a token is answered. The local
// cloud's IMDS always requires tokens (IMDSv2 only) and has no hop limit
// or MetadataOptions, so this stands for an instance configured to allow
// IMDSv1. It returns the endpoint, reachable only from the node.
func imdsV1(t *testing.T, c *simcluster.Cluster, n *simcluster.Node) string {
	t.Helper()
	inner := c.Cloud.IMDSHandler(n.ID)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("X-aws-ec2-metadata-token") == "" {
			rec := httptest.NewRecorder()
			tr := httptest.NewRequest(http.MethodPut, "/latest/api/token", nil)
			tr.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
			inner.ServeHTTP(rec, tr)
			r.Header.Set("X-aws-ec2-metadata-token", rec.Body.String())
		}
		inner.ServeHTTP(w, r)
	})
	var ln net.Listener
	if err := fabric.Do(n.NetNS, func() (err error) {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// Story 12 (seed 000): a pod that reaches IMDS reads the node role's
// credentials. On the local cloud a pod reaches IMDS through its node (no
// hop limit is emulated); doctor reports the exposure from EC2's
// MetadataOptions when EC2 serves them, else from IMDS answering without
// a token.
func TestStory12PodsReachIMDS(t *testing.T) {
	c := startCluster(t, twoNodes, nil)
	n := c.Nodes[0]
	p, err := n.AddPod(t.Context(), "curious")
	if err != nil {
		t.Fatal(err)
	}
	id, err := imdsGet(t.Context(), p.NetNS, "instance-id")
	if err != nil {
		t.Fatalf("the pod cannot reach IMDS (%v): the story needs it to", err)
	}
	if strings.TrimSpace(id) != n.ID {
		t.Errorf("IMDS from the pod says instance %q, want %s", id, n.ID)
	}

	// IMDSv2 only, as the local cloud serves it: nothing doctor can
	// prove from the node, so no finding.
	res := runDoctor(t, n, "--skip", "kubernetes")
	if res.code != 0 || len(res.report.Findings) != 0 {
		t.Errorf("doctor with IMDSv2 required: exit %d\n%s", res.code, res.out)
	}

	res = runDoctor(t, n, "--skip", "kubernetes", "--imds-endpoint", imdsV1(t, c, n))
	res.wantFinding(t, "imds-reachable-from-pods", doctor.Warning, "IMDS answered a request without a session token", "--http-tokens required --http-put-response-hop-limit 1")
}
