package controller

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/budget/budgetapi"
)

// TokenReviewer creates TokenReviews: client-go's
// AuthenticationV1().TokenReviews() satisfies it.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// Authorizer checks an agent's bearer token: the API server says whose it
// is (a TokenReview), and that user must be one of the allowed clients.
// Answers are cached by the token's hash for a short time, so a thousand
// agents asking every few seconds cost the API server a review per agent
// per TTL, not per request. The cache is bounded: past its size, the
// entry closest to expiry goes. It is safe for concurrent use.
type Authorizer struct {
	reviews TokenReviewer
	allowed []string
	now     func() time.Time
	ttl     time.Duration
	// negativeTTL is shorter: a refused agent whose binding was just
	// fixed should not wait long.
	negativeTTL time.Duration
	max         int

	// mu guards cache.
	mu    sync.Mutex
	cache map[[sha256.Size]byte]verdict
}

// verdict is one token's cached answer.
type verdict struct {
	// err is nil for an allowed token, else why it is refused.
	err     error
	expires time.Time
}

// AuthorizerOptions configure an Authorizer.
type AuthorizerOptions struct {
	// Allowed are the usernames allowed (system:serviceaccount:NS:NAME).
	Allowed []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// TTL is how long an allowed token is trusted without a new review
	// (default 5 minutes: a thousand agents then cost the API server about
	// three reviews a second); a refused one is remembered for a fifth of
	// it, so a fixed binding takes effect within a minute.
	TTL time.Duration
	// MaxEntries bounds the cache (default 4096: a token per agent).
	MaxEntries int
}

// NewAuthorizer returns an Authorizer asking reviews.
func NewAuthorizer(reviews TokenReviewer, o AuthorizerOptions) *Authorizer {
	a := &Authorizer{reviews: reviews, allowed: slices.Clone(o.Allowed), now: o.Now, ttl: o.TTL, max: o.MaxEntries,
		cache: map[[sha256.Size]byte]verdict{}}
	if a.now == nil {
		a.now = time.Now
	}
	if a.ttl <= 0 {
		a.ttl = 5 * time.Minute
	}
	a.negativeTTL = a.ttl / 5
	if a.max <= 0 {
		a.max = 4096
	}
	return a
}

// errReviewFailed wraps a failure to ask the API server, as opposed to
// its answer.
var errReviewFailed = fmt.Errorf("cannot check the token with the API server (TokenReview): %w", budgetapi.ErrUnavailable)

// Authorize says whether token belongs to an allowed client: nil, or why
// not. Errors reaching the API server are not cached.
func (a *Authorizer) Authorize(ctx context.Context, token string) error {
	key := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	v, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now.Before(v.expires) {
		return v.err
	}
	tr, err := a.reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%w: %w", errReviewFailed, err)
	}
	v = verdict{expires: now.Add(a.ttl)}
	switch user := tr.Status.User.Username; {
	case !tr.Status.Authenticated:
		v.err = fmt.Errorf("token refused by the API server: %s", orDefault(tr.Status.Error, "not authenticated"))
	case !slices.Contains(a.allowed, user):
		v.err = fmt.Errorf("%s may not reserve EC2 calls: allowed are %s (VPCNET_BUDGET_CLIENTS)", user, strings.Join(a.allowed, ", "))
	}
	if v.err != nil {
		v.expires = now.Add(a.negativeTTL)
	}
	a.store(key, v, now)
	return v.err
}

// store caches v, making room if the cache is full: expired entries
// first, else the one expiring soonest.
func (a *Authorizer) store(key [sha256.Size]byte, v verdict, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.cache[key]; !ok && len(a.cache) >= a.max {
		for k, e := range a.cache {
			if !now.Before(e.expires) {
				delete(a.cache, k)
			}
		}
		for len(a.cache) >= a.max {
			var oldest [sha256.Size]byte
			first := true
			for k, e := range a.cache {
				if first || e.expires.Before(a.cache[oldest].expires) {
					oldest, first = k, false
				}
			}
			delete(a.cache, oldest)
		}
	}
	a.cache[key] = v
}

// Len is how many tokens are cached.
func (a *Authorizer) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cache)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
