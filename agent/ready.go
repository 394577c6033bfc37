package agent

import (
	"sync"
	"time"
)

// Readiness condition names, reported in this order by /readyz, /v1/status
// and the Status RPC. The agent is ready only when every one holds: a port
// that listens is not enough (DESIGN.md story 5).
const (
	CondConfig     = "ConfigValid"
	CondCheckpoint = "CheckpointLoaded"
	CondCloud      = "CloudReconciled"
	CondHost       = "HostNetworkReady"
	CondSocket     = "SocketServing"
	CondAddresses  = "AddressesAvailable"
)

var conditionOrder = []string{CondConfig, CondCheckpoint, CondCloud, CondHost, CondSocket, CondAddresses}

// Condition is one readiness check and why it holds or not.
type Condition struct {
	Name    string    `json:"name"`
	OK      bool      `json:"ok"`
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
}

// readiness tracks the conditions. Any goroutine may set them.
type readiness struct {
	now func() time.Time

	mu    sync.Mutex // guards conds
	conds map[string]Condition
}

func newReadiness(now func() time.Time) *readiness {
	r := &readiness{now: now, conds: make(map[string]Condition)}
	for _, name := range conditionOrder {
		r.conds[name] = Condition{Name: name, Message: "not checked yet", Since: now()}
	}
	return r
}

// set records a condition; Since changes only when OK flips, so operators
// see how long a node has been unready.
func (r *readiness) set(name string, ok bool, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conds[name]
	if c.OK != ok || c.Since.IsZero() {
		c.Since = r.now()
	}
	c.Name, c.OK, c.Message = name, ok, msg
	r.conds[name] = c
}

// get returns whether every condition holds, and each one in order.
func (r *readiness) get() (bool, []Condition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ready := true
	out := make([]Condition, 0, len(conditionOrder))
	for _, name := range conditionOrder {
		c := r.conds[name]
		ready = ready && c.OK
		out = append(out, c)
	}
	return ready, out
}
