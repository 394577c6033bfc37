// Package budgetapi is how agents ask the budget controller for EC2
// calls: one JSON request and one JSON answer per HTTP POST to
// ReservePath, over the cluster network. The controller's leader is found
// through its Lease (see HolderEndpoint), so an agent needs neither
// cluster DNS nor kube-proxy, which may not run yet on a node that is
// joining.
package budgetapi

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/budget"
)

// ReservePath is the controller's one endpoint.
const ReservePath = "/v1/reserve"

// NotLeaderHeader marks a 503 from a replica that does not lead (yet).
// At a failover the Lease names the new leader a moment before that
// replica hears it won, so an agent that read the Lease may ask too
// early: it steps aside only briefly for this answer, not for Alone.
const NotLeaderHeader = "Vpcnet-Budget-Not-Leader"

// MaxNames is the most actions, throttled actions, subnets or exhausted
// subnets one request may name.
const MaxNames = 16

// MaxRequestBytes bounds a request body: a request names a handful of
// actions.
const MaxRequestBytes = 64 << 10

// Answer is the controller's reply to a budget.Request, in milliseconds
// from when the controller answered (the nodes' clocks need not agree).
type Answer struct {
	// WaitMs is how long to wait before making the calls.
	WaitMs int64 `json:"waitMs"`
	// DeferredMs, when not zero, says the calls were not granted: ask
	// again after this long.
	DeferredMs int64 `json:"deferredMs,omitempty"`
	// Pressure are the request's subnets that are nearly full.
	Pressure []string `json:"pressure,omitempty"`
	// Ticket, with DeferredMs, holds the request's booked slot: ask
	// again with it and with SlotMs.
	Ticket uint64 `json:"ticket,omitempty"`
	// SlotMs, with Ticket, is when the booked slot falls, from now.
	SlotMs int64 `json:"slotMs,omitempty"`
}

// AnswerOf encodes a grant.
func AnswerOf(g budget.Grant) Answer {
	return Answer{WaitMs: ceilMs(g.Wait), DeferredMs: ceilMs(g.Deferred), Pressure: g.Pressure, Ticket: g.Ticket, SlotMs: g.Slot.Milliseconds()}
}

// Grant decodes an answer.
func (a Answer) Grant() budget.Grant {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return budget.Grant{Wait: ms(a.WaitMs), Deferred: ms(a.DeferredMs), Pressure: a.Pressure, Ticket: a.Ticket, Slot: ms(a.SlotMs)}
}

func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Validate says what is wrong with a request an agent sent.
func Validate(r budget.Request) error {
	if r.Node == "" {
		return fmt.Errorf("request names no node")
	}
	if max(len(r.Actions), len(r.Throttled), len(r.Subnets), len(r.Exhausted)) > MaxNames {
		return fmt.Errorf("request from %s names %d actions, %d throttled ones, %d subnets and %d exhausted ones; at most %d each", r.Node, len(r.Actions), len(r.Throttled), len(r.Subnets), len(r.Exhausted), MaxNames)
	}
	for _, s := range append(append([]string(nil), r.Subnets...), r.Exhausted...) {
		if !validID(s) {
			return fmt.Errorf("request from %s: %q is not a subnet id", r.Node, s)
		}
	}
	if r.SlotMs != nil && (*r.SlotMs > budget.MaxSlot.Milliseconds() || *r.SlotMs < -budget.MaxSlot.Milliseconds()) {
		return fmt.Errorf("request from %s: its ticket's slot is %d ms from now, more than %v either side: ask again without the ticket", r.Node, *r.SlotMs, budget.MaxSlot)
	}
	if r.AgeMs < 0 || r.AgeMs > budget.MaxSlot.Milliseconds() {
		return fmt.Errorf("request from %s: its age is %d ms: send how long the request has been needed, 0 to %d (an hour)", r.Node, r.AgeMs, budget.MaxSlot.Milliseconds())
	}
	for _, a := range append(append([]string(nil), r.Actions...), r.Throttled...) {
		if !budget.ValidAction(a) {
			return fmt.Errorf("request from %s: %q is not an EC2 action name", r.Node, a)
		}
	}
	return nil
}

// validID accepts EC2 resource ids such as subnet-0abc: lower-case
// letters, digits and '-', at most 64.
func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// HolderIdentity is what the controller's leader writes into its Lease:
// its pod name and the address it serves on, so agents reading the Lease
// know where to ask.
func HolderIdentity(pod, hostPort string) string { return pod + " " + hostPort }

// HolderEndpoint reads the address out of a Lease's holderIdentity
// written by HolderIdentity.
func HolderEndpoint(holder string) (string, error) {
	i := strings.LastIndexByte(holder, ' ')
	if i < 0 {
		return "", fmt.Errorf("lease holder %q names no address (want \"POD HOST:PORT\")", holder)
	}
	hp := holder[i+1:]
	if _, _, err := net.SplitHostPort(hp); err != nil {
		return "", fmt.Errorf("lease holder %q: address: %w", holder, err)
	}
	return hp, nil
}
