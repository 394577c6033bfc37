package integration

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/kube"
)

// startPolicyWatch runs NetworkPolicy enforcement's watches as vpcnetd
// runs them beside the layer, under the same ServiceAccount, recording
// their requests in reqs, and waits until they have listed: a rule the
// ClusterRole lacks keeps them from listing, and shows in reqs as 403.
func startPolicyWatch(t *testing.T, rc *rest.Config, reqs *requestLog) {
	t.Helper()
	rc = rest.CopyConfig(rc)
	rc.Wrap(reqs.wrap)
	src, err := kube.PolicySourcesForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	w := kube.NewPolicyWatch(src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx, func() {}); err != nil {
			t.Errorf("policy watch Run = %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(waitTimeout)
	for !w.Synced() {
		if time.Now().After(deadline) {
			var refused []string
			for _, r := range reqs.all() {
				if r.code == http.StatusForbidden && !slices.Contains(refused, r.perm) {
					refused = append(refused, r.perm)
				}
			}
			t.Fatalf("the NetworkPolicy, namespace and pod watches did not list within %s under the agent's ServiceAccount; refused: %q", waitTimeout, refused)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
