package agent

import (
	"github.com/vpcnet/vpcnet/introspect"
	"sync"
	"time"
)

// Readiness condition names, reported in this order by /readyz, /v1/status
// and the Status RPC. The agent is ready only when every one holds: a port
// that listens is not enough (DESIGN.md story 5). CondENIConfig exists
// only with custom networking, the one Kubernetes feature readiness waits
// for: without its ENIConfig the node has no subnet for pod addresses.
const (
	CondConfig     = "ConfigValid"
	CondCheckpoint = "CheckpointLoaded"
	CondCloud      = "CloudReconciled"
	CondHost       = "HostNetworkReady"
	CondSocket     = "SocketServing"
	CondENIConfig  = "ENIConfigReady"
	CondAddresses  = "AddressesAvailable"
)

// Diagnostic condition names, reported by /v1/status under "diagnostics".
// They never make the agent unready: everything but custom networking
// degrades while the API server is away.
const (
	CondKubernetes   = "KubernetesAPI"
	CondNodeIdentity = "NodeIdentity"
	CondStartupTaint = "StartupTaintRemoved"
	// CondEC2Permissions is the IAM preflight (preflight.go).
	CondEC2Permissions = "EC2Permissions"
)

// conditionOrder lists the readiness conditions for the settings.
func conditionOrder(customNetwork bool) []string {
	order := []string{CondConfig, CondCheckpoint, CondCloud, CondHost, CondSocket}
	if customNetwork {
		order = append(order, CondENIConfig)
	}
	return append(order, CondAddresses)
}

var diagnosticOrder = []string{CondKubernetes, CondNodeIdentity, CondStartupTaint, CondEC2Permissions}

// Condition is one readiness check and why it holds or not.
type Condition = introspect.Condition

// readiness tracks a fixed list of conditions. Any goroutine may set them.
type readiness struct {
	now   func() time.Time
	order []string

	mu    sync.Mutex // guards conds
	conds map[string]Condition
}

func newReadiness(now func() time.Time, order []string) *readiness {
	r := &readiness{now: now, order: order, conds: make(map[string]Condition)}
	for _, name := range order {
		r.conds[name] = Condition{Name: name, Message: "not checked yet", Since: now()}
	}
	return r
}

// set records a condition; Since changes only when OK flips, so operators
// see how long a node has been unready.
func (r *readiness) set(name string, ok bool, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, known := r.conds[name]
	if !known {
		panic("agent: condition " + name + " is not tracked here")
	}
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
	out := make([]Condition, 0, len(r.order))
	for _, name := range r.order {
		c := r.conds[name]
		ready = ready && c.OK
		out = append(out, c)
	}
	return ready, out
}
