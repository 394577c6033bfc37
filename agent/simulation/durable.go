package simulation

import (
	"slices"
	"time"
)

// wireDelays are how long the plugin may take between the agent's answer
// and the pod's route on the host: it is another process, and the agent
// can crash in between. All are far below the agent's ReclaimAfter, as a
// real plugin's few milliseconds are.
var wireDelays = []time.Duration{0, 100 * time.Millisecond, time.Second, 3 * time.Second}

// wire is the plugin finishing an answered ADD: the pod's route is on the
// host and the pod is live. I1: nobody else has that address routed.
func (r *run) wire(name string, p *pod) error {
	r.host.mu.Lock()
	other, taken := r.host.routes[p.addr]
	if !taken {
		r.host.routes[p.addr] = name
	}
	r.host.mu.Unlock()
	if taken {
		return r.fail("I1: %s given %s, which live pod %s holds", name, p.addr, other)
	}
	p.state = podLive
	r.trace("ADD %s → %s wired", name, p.addr)
	return nil
}

// answeredPod is a random pod the plugin has not wired yet, or "".
func (r *run) answeredPod() string {
	names := r.podsIn(podAnswered)
	if len(names) == 0 {
		return ""
	}
	return names[r.rng.IntN(len(names))]
}

func (r *run) podsIn(s podState) []string {
	var names []string
	for name, p := range r.pods {
		if p.state == s {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// wireDue wires the answered pods whose plugin is done by now.
func (r *run) wireDue() error {
	for _, name := range r.podsIn(podAnswered) {
		if p := r.pods[name]; !r.clk.Now().Before(p.wireBy) {
			if err := r.wire(name, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// wireAll wires every answered pod: the plugins finished.
func (r *run) wireAll() error {
	for _, name := range r.podsIn(podAnswered) {
		if err := r.wire(name, r.pods[name]); err != nil {
			return err
		}
	}
	return nil
}

// operatorLosesCheckpoint replaces the checkpoint by b (nil: deleted)
// while the agent is down. An operator's hands are slower than a
// plugin's: every answered pod is wired by then. The pods answered so far
// are outside I7's promise, which is about crashes, not lost files.
func (r *run) operatorLosesCheckpoint(b []byte) error {
	if err := r.wireAll(); err != nil {
		return err
	}
	for _, p := range r.pods {
		if p.state == podLive {
			p.unchecked = true
		}
	}
	r.disk.set(b)
	return nil
}

// checkDurable is I7: every ADD the agent answered survives any crash,
// that is, its entry is in the checkpoint on disk from the moment the
// answer leaves until the pod's DEL, whether or not the plugin has wired
// the pod yet.
func (r *run) checkDurable() error {
	var names []string
	for name, p := range r.pods {
		if (p.state == podAnswered || p.state == podLive) && !p.unchecked {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	holds := r.disk.onDisk()
	for _, name := range names {
		p := r.pods[name]
		if addr, ok := holds[p.key]; !ok || addr != p.addr {
			what := "no entry for it"
			if ok {
				what = "it at " + addr.String()
			}
			return r.fail("I7: the ADD of %s (%s) was answered %s, but the checkpoint on disk has %s: a crash now loses it", name, p.key, p.addr, what)
		}
	}
	return nil
}
