package sim

import (
	"testing"
	"time"
)

// Token lifetimes run on the wall clock (see imdsTokens), so this test
// swaps that clock from inside the package instead of sleeping.
func TestIMDSTokenExpires(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tokens := newIMDSTokens()
	tokens.now = func() time.Time { return now }
	tok := tokens.issue("i-1", 10*time.Second)
	if !tokens.valid("i-1", tok) {
		t.Fatal("fresh token refused")
	}
	if tokens.valid("i-2", tok) {
		t.Error("token accepted for another instance")
	}
	now = now.Add(9999 * time.Millisecond)
	if !tokens.valid("i-1", tok) {
		t.Error("token refused before its TTL")
	}
	now = now.Add(time.Millisecond)
	if tokens.valid("i-1", tok) {
		t.Error("token accepted at its TTL")
	}
	tokens.issue("i-1", time.Second) // prunes expired tokens
	tokens.mu.Lock()
	defer tokens.mu.Unlock()
	if _, ok := tokens.byToken[tok]; ok {
		t.Error("expired token kept after the next issue")
	}
}
