package kube

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// apiErr is a request that failed lately, by what it was for.
type apiErr struct {
	msg string
	at  time.Time
}

// errorTTL is how long a failure is reported after it last happened. The
// informers retry a failing list or watch at least once a minute, so a
// failure that stops recurring for this long has been fixed.
const errorTTL = 2 * time.Minute

// noteAPI records how a request for what went. The API server is
// reachable when it answers, even with an error (a missing RBAC verb is
// an answer); it is unreachable when it is silent or failing (5xx).
func (c *Client) noteAPI(what string, err error) {
	c.mu.Lock()
	now := c.now()
	answered := err == nil || isAnswer(err)
	flipped := answered != c.reachable || c.since.IsZero()
	if flipped {
		c.reachable, c.since = answered, now
	}
	if err == nil {
		delete(c.errs, what)
	} else {
		c.errs[what] = apiErr{msg: what + ": " + explain(err), at: now}
	}
	c.mu.Unlock()
	switch {
	case flipped && answered:
		c.log.Info("Kubernetes API server reachable", "source", c.o.Source)
	case flipped:
		c.log.Warn("Kubernetes API server unreachable: Events wait, the startup taint waits, custom networking keeps the ENIConfig it last read; address management goes on", "err", err)
	case err != nil:
		c.log.Warn("Kubernetes API request failed", "what", what, "err", err)
	}
	c.notify()
}

// isAnswer says the API server answered with a status below 500.
func isAnswer(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st) && st.Status().Code > 0 && st.Status().Code < http.StatusInternalServerError
}

// forbiddenRemedy follows a refusal by RBAC, whose message names the verb
// and the resource: the fix is never in the agent but in its ClusterRole.
const forbiddenRemedy = "grant it in the ClusterRole bound to vpcnetd's ServiceAccount (ClusterRole vpcnet in deploy/vpcnet.yaml, also rendered by the Helm chart)"

// explain is err as the status shows it: a refusal by RBAC says where to
// grant what is missing. The authorizer's refusals read `User "..."
// cannot <verb> resource "<resource>"...`; other Forbidden answers (a
// namespace being terminated) are no RBAC matter.
func explain(err error) string {
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "\" cannot ") {
		return err.Error() + ": " + forbiddenRemedy
	}
	return err.Error()
}

// errorsLocked lists the recent failures, oldest first.
func (c *Client) errorsLocked() string {
	now := c.now()
	var recent []apiErr
	for what, e := range c.errs {
		if now.Sub(e.at) > errorTTL {
			delete(c.errs, what)
			continue
		}
		recent = append(recent, e)
	}
	slices.SortFunc(recent, func(a, b apiErr) int { return a.at.Compare(b.at) })
	msgs := make([]string, len(recent))
	for i, e := range recent {
		msgs[i] = e.msg
	}
	return strings.Join(msgs, "; ")
}

// healthy says the last request was answered and nothing failed lately.
func (c *Client) healthy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reachable && c.errorsLocked() == ""
}

// probeLoop asks the API server for this node's Node while it is
// failing, so the status says when it is back even while nothing else asks
// it anything. A healthy API server is not probed: thousands of nodes
// would add up. host names the Node until the Node is found.
func (c *Client) probeLoop(ctx context.Context, host string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.o.ProbeInterval):
		}
		if c.healthy() {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, c.o.ProbeInterval)
		err := c.probe(pctx, host)
		cancel()
		if ctx.Err() != nil {
			return
		}
		c.noteAPI(reachWhat, err)
	}
}

// probe reads this node's Node from the API server's cache (resource
// version 0), which costs it about what /version does and needs only the
// core/v1 client (the discovery client that /version takes links the
// OpenAPI packages) and the "get nodes" the agent has anyway. Not found is
// an answer.
func (c *Client) probe(ctx context.Context, host string) error {
	name := host
	c.mu.Lock()
	if c.node != nil {
		name = c.node.Name
	}
	c.mu.Unlock()
	_, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// watchErrors routes an informer's list and watch failures into the
// status. Ends of watches that the reflector handles by itself are not
// failures.
func (c *Client) watchErrors(inf cache.SharedIndexInformer, what string, also func(error)) {
	err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return
		}
		if also != nil {
			also(err)
		}
		c.noteAPI(what, err)
	})
	if err != nil {
		panic("kube: watch error handler set after the informer started: " + err.Error())
	}
}
