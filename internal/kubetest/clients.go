package kubetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Client-side rate limits high enough that tests never wait on them; the
// client-go defaults (5 QPS) would make a test's speed depend on them.
const (
	clientQPS   = 500
	clientBurst = 1000
)

// tokenLifetime is how long a minted service account token lasts: longer
// than any test run.
const tokenLifetime = 2 * 60 * 60 // seconds

// AdminConfig returns a new config for the cluster's admin, a client
// certificate in group system:masters: every request is authorized, whatever
// RBAC objects exist.
func (c *Cluster) AdminConfig() *rest.Config {
	return &rest.Config{
		Host:      c.host,
		UserAgent: "vpcnet-kubetest-admin",
		QPS:       clientQPS,
		Burst:     clientBurst,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.pki.caPEM,
			CertData: c.pki.adminPEM,
			KeyData:  c.pki.adminKey,
		},
	}
}

// AdminClient returns a typed clientset for the admin.
func (c *Cluster) AdminClient() (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("admin clientset: %w", err)
	}
	return cs, nil
}

// ServiceAccountConfig returns a config that authenticates as the service
// account namespace/name (user system:serviceaccount:namespace:name), with a
// token minted through the TokenRequest API: what the agent's pod would get
// from its projected token. The service account must exist (apply it first);
// its requests are authorized by RBAC like any pod's.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	admin, err := c.AdminClient()
	if err != nil {
		return nil, err
	}
	lifetime := int64(tokenLifetime)
	tr, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &lifetime},
	}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("mint token for service account %s/%s: it does not exist; apply its ServiceAccount first: %w", namespace, name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("mint token for service account %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            c.host,
		UserAgent:       "vpcnet-kubetest-sa-" + namespace + "-" + name,
		QPS:             clientQPS,
		Burst:           clientBurst,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM},
	}, nil
}

// CreateNamespace creates a namespace and its "default" ServiceAccount,
// which kube-controller-manager would create in a real cluster; without it
// the ServiceAccount admission plugin rejects pods that name no service
// account.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	_, err := c.createNamespace(ctx, metav1.ObjectMeta{Name: name})
	return err
}

// TestNamespace creates a namespace for one test, named after it with a
// random suffix so tests sharing a cluster (and reruns with -count) never
// collide, with its "default" ServiceAccount as CreateNamespace. It fails
// the test if it cannot. Nothing deletes it: the cluster goes away whole.
func (c *Cluster) TestNamespace(t testing.TB) string {
	t.Helper()
	name, err := c.createNamespace(t.Context(), metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())})
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return name
}

func (c *Cluster) createNamespace(ctx context.Context, meta metav1.ObjectMeta) (string, error) {
	admin, err := c.AdminClient()
	if err != nil {
		return "", err
	}
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: meta}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace %s: %w", meta.Name+meta.GenerateName, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := admin.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create default service account in namespace %s: %w", ns.Name, err)
	}
	return ns.Name, nil
}

// namespacePrefix turns a test name into a DNS label prefix, leaving room
// for the apiserver's 5-character random suffix.
func namespacePrefix(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	p := strings.Trim(b.String(), "-")
	if len(p) > 50 {
		p = strings.TrimRight(p[:50], "-")
	}
	if p == "" {
		p = "test"
	}
	return p + "-"
}
