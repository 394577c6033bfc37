package nodestate

import (
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// jobTable tracks the jobs handed out and not yet answered, and those
// scheduled for later (attachment polls, DeleteOnTermination retries,
// deletes of detached ENIs).
type jobTable struct {
	nextID   uint64
	inFlight map[uint64]Job
	// granted are the jobs in flight whose calls the cluster's budget
	// granted (JobGrant): they call EC2 now.
	granted map[uint64]bool
	later   []scheduled
}

type scheduled struct {
	at  time.Time
	job Job
}

func (t *jobTable) init() {
	t.inFlight = make(map[uint64]Job)
	t.granted = make(map[uint64]bool)
}

func (t *jobTable) start(j Job) Job {
	t.nextID++
	j.ID = t.nextID
	t.inFlight[j.ID] = j
	return j
}

// done forgets job id and returns it.
func (t *jobTable) done(id uint64) (Job, bool) {
	j, ok := t.inFlight[id]
	delete(t.inFlight, id)
	delete(t.granted, id)
	return j, ok
}

// grant records that job id's calls were granted; a job already
// answered (its result overtook the news) is not recorded.
func (t *jobTable) grant(id uint64) {
	if _, ok := t.inFlight[id]; ok {
		t.granted[id] = true
	}
}

// brings counts the addresses the granted jobs in flight will add to the
// pool (ipam.Action.Brings).
func (t *jobTable) brings() int {
	k := 0
	for id := range t.granted {
		if j := t.inFlight[id]; j.Kind == JobAction {
			k += j.Action.Brings()
		}
	}
	return k
}

func (t *jobTable) schedule(at time.Time, j Job) { t.later = append(t.later, scheduled{at, j}) }

// due removes and returns the scheduled jobs whose time has come.
func (t *jobTable) due(now time.Time) []Job {
	var out []Job
	t.later = slices.DeleteFunc(t.later, func(s scheduled) bool {
		if now.Before(s.at) {
			return false
		}
		out = append(out, s.job)
		return true
	})
	return out
}

func (t *jobTable) nextScheduled() time.Time {
	var w time.Time
	for _, s := range t.later {
		if w.IsZero() || s.at.Before(w) {
			w = s.at
		}
	}
	return w
}

// running says whether a job matching f is in flight or scheduled.
func (t *jobTable) running(f func(Job) bool) bool {
	for _, j := range t.inFlight {
		if f(j) {
			return true
		}
	}
	return slices.ContainsFunc(t.later, func(s scheduled) bool { return f(s.job) })
}

func (t *jobTable) count(f func(Job) bool) int {
	k := 0
	for _, j := range t.inFlight {
		if f(j) {
			k++
		}
	}
	return k
}

func kindIs(k JobKind) func(Job) bool { return func(j Job) bool { return j.Kind == k } }

// Calls are the EC2 actions the job makes at most, each once, for a
// cluster-wide budget (package budget) to grant before it runs. IMDS
// reads are free and not listed: a confirm or resync that watches IMDS
// first lists nothing, and asks EC2 once IMDS shows a change.
func (j Job) Calls() []string {
	switch j.Kind {
	case JobResync, JobConfirmAttach:
		if j.MAC != "" || j.IMDSDigest != "" {
			return nil
		}
		// An ENI in a subnet not seen yet has its subnet described.
		return []string{"DescribeNetworkInterfaces", "DescribeSubnets"}
	case JobSetDeleteOnTermination:
		return []string{"ModifyNetworkInterfaceAttribute"}
	case JobDeleteENI:
		return []string{"DescribeNetworkInterfaces", "DeleteNetworkInterface"}
	case JobAction:
		switch j.Action.Kind {
		case ipam.AttachENI:
			// The primary ENI's connection tracking and the subnets to
			// try are read first (the first once per agent; the second
			// one call, the zone's listing, at most every ten minutes:
			// executor's subnetsTTL), and an ENI whose attach failed is
			// deleted at once.
			return []string{"DescribeNetworkInterfaces", "DescribeSubnets", "CreateNetworkInterface", "AttachNetworkInterface",
				"ModifyNetworkInterfaceAttribute", "DeleteNetworkInterface"}
		case ipam.AssignBlocks:
			if j.Action.IPv6 {
				return []string{"AssignIpv6Addresses"}
			}
			// A prefix refused for fragmentation asks the subnet's free
			// count.
			if j.Action.Prefixes {
				return []string{"AssignPrivateIpAddresses", "DescribeSubnets"}
			}
			return []string{"AssignPrivateIpAddresses"}
		case ipam.ReleaseBlocks:
			return []string{"DescribeNetworkInterfaces", "UnassignPrivateIpAddresses"}
		case ipam.DetachENI:
			return []string{"DescribeNetworkInterfaces", "DetachNetworkInterface"}
		}
	}
	return nil
}
