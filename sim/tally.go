package sim

import (
	"maps"
	"net/http"
	"sync"
)

// tally counts the EC2 requests each instance made, by action, as
// CloudTrail would list them: every request that named an action EC2
// knows, whatever its answer (a throttled or refused call is spent all
// the same). Requests no instance can be named for are not counted.
type tally struct {
	mu    sync.Mutex
	calls map[string]map[string]int // instance ID → action → requests
}

func (t *tally) add(instance, action string) {
	if instance == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls == nil {
		t.calls = map[string]map[string]int{}
	}
	if t.calls[instance] == nil {
		t.calls[instance] = map[string]int{}
	}
	t.calls[instance][action]++
}

func (t *tally) of(instance string) map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.calls[instance])
}

// DryRunSuffix marks a DryRun request's action in Calls: EC2 counts it
// against the action's bucket, yet it changes nothing.
const DryRunSuffix = " (DryRun)"

// Calls is how many EC2 requests instanceID has made so far, by action.
// A request is the instance's when its credentials name it (as the local
// cloud's agents sign) or when it came through the instance's own EC2
// endpoint (EC2HandlerFor) with credentials that name no instance, as an
// instance profile's calls are attributed to the instance in CloudTrail.
func (c *Cloud) Calls(instanceID string) map[string]int { return c.tally.of(instanceID) }

// EC2HandlerFor is EC2Handler for the endpoint inside instanceID's
// network: the requests it serves count as the instance's (Calls) when
// their credentials name no instance. Authorization still goes by the
// credentials alone.
func (c *Cloud) EC2HandlerFor(instanceID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) { c.serveEC2(w, hr, instanceID) })
}
