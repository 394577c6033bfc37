// Package testlog gives tests a slog.Logger that writes into the test's
// own log, so a failing test shows what the code under test said.
package testlog

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
)

// New logs at level and above into t until t ends, and nowhere after:
// goroutines of the code under test (an Event broadcaster, an agent
// shutting down) may still write as they stop, and testing panics on a Log
// after the test has completed.
func New(t testing.TB, level slog.Level) *slog.Logger {
	w := &writer{t: t}
	t.Cleanup(func() { w.ended.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type writer struct {
	t     testing.TB
	ended atomic.Bool
}

func (w *writer) Write(p []byte) (int, error) {
	if !w.ended.Load() {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
