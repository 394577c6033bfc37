package ipam

import "fmt"

// Limit names what stopped the pool from growing.
type Limit int

const (
	// NoLimit: nothing stopped growth.
	NoLimit Limit = iota
	// InstanceENILimit: every ENI the instance type allows is attached and
	// full.
	InstanceENILimit
	// MaxENILimit: every ENI MAX_ENI allows is attached and full, below
	// the instance type's own limit.
	MaxENILimit
	// MaxPodsLimit: the pool already holds as many addresses as max pods
	// can use.
	MaxPodsLimit
)

func (l Limit) String() string {
	switch l {
	case NoLimit:
		return "none"
	case InstanceENILimit:
		return "instance ENI limit"
	case MaxENILimit:
		return "MAX_ENI"
	case MaxPodsLimit:
		return "max pods"
	}
	return fmt.Sprintf("Limit(%d)", int(l))
}

// Shortfall says the planned actions leave the pool short of its target
// and which limit is to blame. The agent turns it into the error kubelet
// shows for a waiting pod, an Event and a metric. The zero value means
// the plan reaches the target.
type Shortfall struct {
	// Missing is how many addresses the pool still lacks after the plan.
	Missing int
	// Limit is what stopped growth, and Max its value: ENIs for the ENI
	// limits, pods for MaxPodsLimit.
	Limit Limit
	Max   int
}

// Short reports whether the plan falls short of the target.
func (s Shortfall) Short() bool { return s.Missing > 0 }

// String says what ran out and what an operator can do, in one line.
func (s Shortfall) String() string {
	if !s.Short() {
		return "no shortfall"
	}
	need := plural(s.Missing, "address", "addresses")
	switch s.Limit {
	case InstanceENILimit:
		return fmt.Sprintf("%s short: all %d ENIs the instance type allows are attached and full; use a larger instance type or enable prefix delegation", need, s.Max)
	case MaxENILimit:
		return fmt.Sprintf("%s short: MAX_ENI=%d ENIs are attached and full; raise MAX_ENI or lower the warm targets", need, s.Max)
	case MaxPodsLimit:
		return fmt.Sprintf("%s short of the target: the pool already holds as many addresses as max pods (%d) can use, and never holds more", need, s.Max)
	}
	return fmt.Sprintf("%s short", need)
}
