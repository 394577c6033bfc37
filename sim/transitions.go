package sim

import (
	"slices"
	"time"
)

// settleLocked completes, in time order, every pending attach or detach
// whose delay has run out by now. Transitions are lazy so that a fake
// clock needs no goroutines: whoever looks at the cloud first after the
// due time sees the new state, and the events go out then.
func (c *Cloud) settleLocked(now time.Time) (changed bool) {
	var due []*eni
	for _, e := range c.enis {
		if e.att != nil && !e.att.due.IsZero() && !e.att.due.After(now) {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *eni) int {
		if d := a.att.due.Compare(b.att.due); d != 0 {
			return d
		}
		return a.seq - b.seq
	})
	for _, e := range due {
		switch e.status {
		case statusAttaching:
			at := e.att.due
			e.status = statusInUse
			e.att.due = time.Time{}
			c.emitLocked(eventFor(ENIAttached, e, at))
		case statusDetaching:
			c.finishDetachLocked(e, e.att.due)
		}
	}
	return len(due) > 0
}

// beginAttachLocked starts attaching e; it is in use after the attach
// delay.
func (c *Cloud) beginAttachLocked(e *eni, att *attachment, now time.Time) {
	e.att = att
	e.status = statusAttaching
	att.due = now.Add(c.attachDelay)
	c.attachments[att.id] = e
	c.emitLocked(eventFor(ENIAttaching, e, now))
	c.settleLocked(now) // a zero delay completes at once
}

// beginDetachLocked starts detaching e; it is available after the detach
// delay.
func (c *Cloud) beginDetachLocked(e *eni, now time.Time) {
	e.status = statusDetaching
	e.att.due = now.Add(c.detachDelay)
	c.settleLocked(now)
}

// finishDetachLocked drops e's attachment and makes it available. An ENI
// cut off while still attaching (its instance terminated) is announced as
// detached too: its attach was announced when it began.
func (c *Cloud) finishDetachLocked(e *eni, at time.Time) {
	ev := eventFor(ENIDetached, e, at)
	delete(c.attachments, e.att.id)
	e.att = nil
	e.status = statusAvailable
	c.emitLocked(ev)
}

// nextDueLocked is the earliest pending transition, or zero.
func (c *Cloud) nextDueLocked() time.Time {
	var next time.Time
	for _, e := range c.enis {
		if e.att != nil && !e.att.due.IsZero() && (next.IsZero() || e.att.due.Before(next)) {
			next = e.att.due
		}
	}
	return next
}

// scheduleLocked arms one timer for the earliest pending transition, so
// subscribers hear of it on time even if nobody calls the API. Without an
// AfterFunc (fake clock, no timers) transitions wait for the next call or
// Tick.
func (c *Cloud) scheduleLocked(now time.Time) {
	if c.afterFunc == nil || c.closed {
		return
	}
	next := c.nextDueLocked()
	if next.Equal(c.timerDue) && c.timerStop != nil {
		return
	}
	if c.timerStop != nil {
		c.timerStop()
		c.timerStop = nil
	}
	c.timerDue = next
	if next.IsZero() {
		return
	}
	c.timerStop = c.afterFunc(next.Sub(now), c.timerFired)
}

func (c *Cloud) timerFired() {
	c.mu.Lock()
	c.timerStop = nil
	c.timerDue = time.Time{}
	c.mu.Unlock()
	c.Tick()
}
