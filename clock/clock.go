// Package clock is the one source of time for vpcnet's agent, its leaked-ENI
// collector and the local cloud. Everything that waits goes through a Clock,
// so a test can move time by hand and replay a schedule exactly: Real is the
// wall clock, Manual moves only when told.
package clock

import (
	"slices"
	"sync"
	"time"
)

// Clock tells the time and runs a function after a delay.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f once d has passed on this clock. stop cancels it
	// and reports whether it had not run yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Real is the wall clock.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// After returns a channel that receives once d has passed on c, and a
// function that releases the timer early. It is time.After for any Clock.
func After(c Clock, d time.Duration) (<-chan time.Time, func() bool) {
	ch := make(chan time.Time, 1)
	stop := c.AfterFunc(d, func() { ch <- c.Now() })
	return ch, stop
}

// Sleep waits d on c, or until done is closed; it reports whether the
// whole of d passed.
func Sleep(c Clock, d time.Duration, done <-chan struct{}) bool {
	ch, stop := After(c, d)
	defer stop()
	select {
	case <-ch:
		return true
	case <-done:
		return false
	}
}

// Manual is a clock for tests: time moves only by Advance or Set, and
// AfterFunc callbacks run inside Advance, in due order, on the caller's
// goroutine.
type Manual struct {
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

// NewManual returns a clock reading start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start}
}

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// AfterFunc runs f once the clock has been advanced by d. stop cancels it
// and reports whether it had not run yet.
func (m *Manual) AfterFunc(d time.Duration, f func()) (stop func() bool) {
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

// NextDue is when the earliest pending callback is due, and whether
// there is one: a simulation jumps straight to it.
func (m *Manual) NextDue() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.timers) == 0 {
		return time.Time{}, false
	}
	due := m.timers[0].due
	for _, t := range m.timers[1:] {
		if t.due.Before(due) {
			due = t.due
		}
	}
	return due, true
}

// Advance moves the clock forward by d and runs every callback that came
// due, earliest first, each seeing the clock at its due time.
func (m *Manual) Advance(d time.Duration) {
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
