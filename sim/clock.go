package sim

import (
	"slices"
	"sync"
	"time"
)

// ManualClock is a fake clock for tests: time moves only by Advance, and
// AfterFunc callbacks run inside Advance, in due order, on the caller's
// goroutine. Pass Now and AfterFunc in Options to drive a Cloud with it.
type ManualClock struct {
	// mu guards now, timers and nextID.
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	nextID int
}

type manualTimer struct {
	id  int
	due time.Time
	f   func()
}

// NewManualClock returns a clock reading start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start}
}

// Now returns the clock's time.
func (m *ManualClock) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// AfterFunc runs f once the clock has been advanced by d. stop cancels it
// and reports whether it had not run yet.
func (m *ManualClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID++
	t := &manualTimer{id: m.nextID, due: m.now.Add(d), f: f}
	m.timers = append(m.timers, t)
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		i := slices.Index(m.timers, t)
		if i < 0 {
			return false
		}
		m.timers = slices.Delete(m.timers, i, i+1)
		return true
	}
}

// Advance moves the clock forward by d and runs every callback that came
// due, earliest first, each seeing the clock at its due time.
func (m *ManualClock) Advance(d time.Duration) {
	m.mu.Lock()
	end := m.now.Add(d)
	m.mu.Unlock()
	for {
		m.mu.Lock()
		slices.SortFunc(m.timers, func(a, b *manualTimer) int {
			if c := a.due.Compare(b.due); c != 0 {
				return c
			}
			return a.id - b.id
		})
		if len(m.timers) == 0 || m.timers[0].due.After(end) {
			m.now = end
			m.mu.Unlock()
			return
		}
		t := m.timers[0]
		m.timers = m.timers[1:]
		if t.due.After(m.now) {
			m.now = t.due
		}
		m.mu.Unlock()
		t.f()
	}
}
