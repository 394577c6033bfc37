package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
)

// Traffic between the policy scenario's pods: a server in a pod that
// sends one byte on every connection, and clients that time a connection
// from its SYN to that byte, or only ask whether it gets through.

// serve accepts connections on ln (a socket of a pod's namespace) and
// sends each one byte, until ln is closed.
func serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte{1})
		c.Close()
	}
}

// connect opens a TCP connection from the namespace at nsPath to addr and
// reads the server's first byte, within timeout: connection set-up as a
// pod's client sees it. The clock runs inside the namespace, so entering
// it is not timed.
func connect(ctx context.Context, nsPath, addr string, timeout time.Duration) (time.Duration, error) {
	var took time.Duration
	var cerr error
	err := fabric.Do(nsPath, func() error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp4", addr)
		if err != nil {
			cerr = err
			return nil
		}
		defer c.Close()
		dl, _ := ctx.Deadline()
		_ = c.SetReadDeadline(dl)
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			cerr = fmt.Errorf("first byte from %s: %w", addr, err)
			return nil
		}
		took = time.Since(start)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return took, cerr
}

// waitReachable connects until a connection succeeds or limit passes:
// rules written a moment ago by an agent that learnt an address from
// the API server.
func waitReachable(ctx context.Context, nsPath, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := connect(ctx, nsPath, addr, 200*time.Millisecond)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s unreachable for %s: %w", addr, limit, err)
		}
	}
}

// Propagation is judged by traffic: from before the change until after
// it is in force, a new connection attempt starts every probeEvery,
// each given probeTimeout to get its first byte (a SYN the rules drop is
// retransmitted only after a second, so a denied attempt simply times
// out). The change is in force from the first attempt after the last
// one that still saw the old verdict.
const (
	probeEvery   = 5 * time.Millisecond
	probeTimeout = 100 * time.Millisecond
	// probeSettled: attempts in a row with the new verdict that end
	// the watch.
	probeSettled = 5
	// probeLimit: a change not in force by then counts as taking it.
	probeLimit = 10 * time.Second
)

type attempt struct {
	start time.Time
	ok    bool
	done  bool
}

// prober starts connection attempts until stopped.
type prober struct {
	mu       sync.Mutex // guards attempts
	attempts []*attempt
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startProber(ctx context.Context, nsPath, addr string) *prober {
	p := &prober{stop: make(chan struct{})}
	p.wg.Go(func() {
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for {
			a := &attempt{start: time.Now()}
			p.mu.Lock()
			p.attempts = append(p.attempts, a)
			p.mu.Unlock()
			p.wg.Go(func() {
				_, err := connect(ctx, nsPath, addr, probeTimeout)
				p.mu.Lock()
				a.ok, a.done = err == nil, true
				p.mu.Unlock()
			})
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return p
}

// snapshot copies the attempts so far, in the order they started.
func (p *prober) snapshot() []attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]attempt, len(p.attempts))
	for i, a := range p.attempts {
		out[i] = *a
	}
	return out
}

func (p *prober) close() {
	close(p.stop)
	p.wg.Wait()
}

// settledAt reads attempts (in the order they started) for when the
// verdict became want after t0: the start of the first attempt after the
// last one that started at or after t0 and saw otherwise. ok is false
// until every attempt up to probeSettled ones in a row with want has
// ended.
func settledAt(attempts []attempt, t0 time.Time, want bool) (time.Time, bool) {
	first := slices.IndexFunc(attempts, func(a attempt) bool { return !a.start.Before(t0) })
	if first < 0 {
		return time.Time{}, false
	}
	after := attempts[first:]
	// The prefix of ended attempts: a later one can end before an
	// earlier one (a denied attempt waits out its timeout).
	n := slices.IndexFunc(after, func(a attempt) bool { return !a.done })
	if n < 0 {
		n = len(after)
	}
	ended := after[:n]
	last := -1
	for i, a := range ended {
		if a.ok != want {
			last = i
		}
	}
	if len(ended)-(last+1) < probeSettled {
		return time.Time{}, false
	}
	return ended[last+1].start, true
}

// waitVerdict waits until probeSettled attempts in a row have ended with
// want: the state a change is measured from is in force.
func (p *prober) waitVerdict(ctx context.Context, want bool, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if _, ok := settledAt(p.snapshot(), time.Time{}, want); ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("connections never settled at allowed=%v within %s", want, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(probeEvery):
		}
	}
}

// errNotInForce says a change was not in force within probeLimit.
var errNotInForce = errors.New("not in force")

// inForce waits until the verdict is want after t0 and says how long
// after t0 it became so; a change never seen in force within probeLimit
// returns probeLimit and errNotInForce.
func (p *prober) inForce(ctx context.Context, t0 time.Time, want bool) (time.Duration, error) {
	for {
		if at, ok := settledAt(p.snapshot(), t0, want); ok {
			return at.Sub(t0), nil
		}
		if time.Since(t0) > probeLimit+probeTimeout {
			return probeLimit, errNotInForce
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(probeEvery):
		}
	}
}
