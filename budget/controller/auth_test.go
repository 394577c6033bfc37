package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeReviews answers TokenReviews from a table of token → username
// ("" for a token the API server does not know) and counts them.
type fakeReviews struct {
	mu      sync.Mutex
	users   map[string]string
	fail    error
	reviews int
}

func (f *fakeReviews) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reviews++
	if f.fail != nil {
		return nil, f.fail
	}
	out := tr.DeepCopy()
	if u, ok := f.users[tr.Spec.Token]; ok {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: u}}
	} else {
		out.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	return out, nil
}

func (f *fakeReviews) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reviews
}

const agentUser = "system:serviceaccount:kube-system:vpcnet"

func TestAuthorizerAllowsOnlyTheAgentsAndCachesTheAnswer(t *testing.T) {
	now := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	f := &fakeReviews{users: map[string]string{"agent": agentUser, "other": "system:serviceaccount:default:app"}}
	a := NewAuthorizer(f, AuthorizerOptions{Allowed: []string{agentUser}, Now: func() time.Time { return now }, TTL: time.Minute})
	ctx := t.Context()

	for range 3 {
		if err := a.Authorize(ctx, "agent"); err != nil {
			t.Fatalf("agent's token refused: %v", err)
		}
	}
	if f.count() != 1 {
		t.Errorf("%d TokenReviews for one token asked three times within the TTL, want 1", f.count())
	}
	err := a.Authorize(ctx, "other")
	if err == nil || !strings.Contains(err.Error(), "system:serviceaccount:default:app may not reserve") || !strings.Contains(err.Error(), "VPCNET_BUDGET_CLIENTS") {
		t.Errorf("another service account: %v, want it refused by name", err)
	}
	if err := a.Authorize(ctx, "forged"); err == nil || !strings.Contains(err.Error(), "invalid bearer token") {
		t.Errorf("unknown token: %v, want the API server's reason", err)
	}
	if f.count() != 3 {
		t.Fatalf("%d TokenReviews, want 3", f.count())
	}

	// A refusal is remembered for a fifth of the TTL, an allowance for
	// the whole TTL.
	now = now.Add(13 * time.Second)
	_ = a.Authorize(ctx, "agent")
	_ = a.Authorize(ctx, "other")
	if f.count() != 4 {
		t.Errorf("%d TokenReviews after 13 s, want 4 (the refused token asked again, the allowed one not)", f.count())
	}
	now = now.Add(time.Minute)
	_ = a.Authorize(ctx, "agent")
	if f.count() != 5 {
		t.Errorf("%d TokenReviews after the TTL, want 5", f.count())
	}
}

func TestAuthorizerDoesNotCacheAPIServerFailures(t *testing.T) {
	f := &fakeReviews{users: map[string]string{"agent": agentUser}, fail: errors.New("connection refused")}
	a := NewAuthorizer(f, AuthorizerOptions{Allowed: []string{agentUser}})
	err := a.Authorize(t.Context(), "agent")
	if !errors.Is(err, errReviewFailed) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v, want errReviewFailed wrapping the cause", err)
	}
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	if err := a.Authorize(t.Context(), "agent"); err != nil {
		t.Errorf("after the API server came back: %v", err)
	}
}

func TestAuthorizerCacheIsBounded(t *testing.T) {
	now := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	users := map[string]string{}
	for i := range 100 {
		users[string(rune('a'+i%26))+strings.Repeat("x", i)] = agentUser
	}
	f := &fakeReviews{users: users}
	a := NewAuthorizer(f, AuthorizerOptions{Allowed: []string{agentUser}, Now: func() time.Time { return now }, MaxEntries: 10})
	for tok := range users {
		now = now.Add(time.Millisecond)
		if err := a.Authorize(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
		if a.Len() > 10 {
			t.Fatalf("cache holds %d tokens, bound 10", a.Len())
		}
	}
	// Forged tokens cannot push out more than the bound either.
	for i := range 50 {
		_ = a.Authorize(t.Context(), "forged"+strings.Repeat("y", i))
	}
	if a.Len() != 10 {
		t.Errorf("cache holds %d tokens, want 10", a.Len())
	}
}
