package nodestate

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

// Config is what the machine needs to know about the node and its settings.
type Config struct {
	InstanceID   string
	InstanceType string
	Plan         ipam.PlanConfig
	Limits       ipam.Limits
	// Cooldown is how long a freed address waits before another pod may
	// have it (IP_COOLDOWN_PERIOD).
	Cooldown time.Duration
	// AddWait bounds how long an Add waits for an address.
	AddWait time.Duration
	// DemandMemory is how long an Add that timed out still counts as
	// demand: kubelet retries it, so the pool must not shrink under it.
	DemandMemory time.Duration
	// ReclaimAfter is how long an assignment's address must be missing
	// from the host's pod routes before the agent releases it itself (a
	// DEL it never saw). Longer than any ADD in flight.
	ReclaimAfter time.Duration
	// ResyncInterval is how often EC2 and the host are read again.
	ResyncInterval time.Duration
	// DetachHold is how long the planner must want an ENI gone, without
	// a break, before it is detached (VPCNET_ENI_DETACH_HOLD). Detaching
	// and later re-creating an ENI costs four mutating calls (detach,
	// delete, create, attach) and a DeleteOnTermination from the
	// account's budget, which every node shares, plus an attach delay
	// for the pods that wait; bursts of pods a minute or two apart paid
	// that on every burst. Addresses are released without a hold (one
	// call, and they are what a nearly full subnet needs back).
	DetachHold time.Duration
	// AttachTimeout bounds how long an attachment is waited for.
	AttachTimeout time.Duration
	// SubnetDiscovery is ENABLE_SUBNET_DISCOVERY: a new ENI may go to
	// another subnet than the node's (the executor picks it), so when the
	// node's subnet is fragmented for prefixes, prefixes are asked for on
	// a new ENI rather than on an ENI of that subnet.
	SubnetDiscovery bool
	// CustomNetwork: pods get addresses only on secondary ENIs in the
	// ENIConfig's subnet; the primary ENI's free addresses are not used.
	CustomNetwork bool
	// IPv6 is aws-node's IPv6 mode (ENABLE_IPv6=true): pods get IPv6
	// addresses from the primary ENI's /80 prefix (ipam.PlanIPv6), and
	// only from it; IPv4 blocks are left alone. Otherwise pods get IPv4
	// addresses and IPv6 prefixes are left alone.
	IPv6 bool
	// HostVeth names the host veth of a pod (the Amazon VPC CNI's rule);
	// nil skips the check that a routed address goes to the pod the
	// checkpoint says holds it.
	HostVeth func(ipam.Pod) string
	// Classify tells the machine what kind of EC2 error it got.
	Classify func(error) ErrorClass
	Log      *slog.Logger
}

// ENIInfo is one attached ENI as EC2 (and, for a new one, the host
// set-up) reported it.
type ENIInfo struct {
	ID          string
	DeviceIndex int
	SubnetID    string
	SubnetCIDR  netip.Prefix
	// SubnetIPv6CIDR is the subnet's IPv6 /64, invalid when it has none
	// (or the executor did not look: IPv4 mode).
	SubnetIPv6CIDR netip.Prefix
	SecurityGroups []string
	PrimaryIP      netip.Addr
	MAC            string
	AttachmentID   string
	// DeleteOnTermination as EC2 reports it for the attachment.
	DeleteOnTermination bool
	CreatedAt           time.Time
	// Blocks are the ENI's secondary /32s, /28 prefixes and IPv6 /80
	// prefixes; the machine takes those of its mode's family.
	Blocks []netip.Prefix
	// HostErr says why the host side of a new secondary ENI could not be
	// set up; such an ENI is not used until a later resync succeeds.
	HostErr error
}

// Boot is what the agent read before the machine starts: the checkpoint,
// the ENIs EC2 says are attached, and the host's pod routes.
type Boot struct {
	Checkpoint checkpoint.State
	// CheckpointMissing says no checkpoint existed (a new node or a lost
	// file): then nothing cools down at start, unless the host routes it.
	CheckpointMissing bool
	ENIs              []ENIInfo
	// Devices are the device indexes taken on network card 0, by any ENI
	// (ours or not).
	Devices []int
	// Unmanaged are the attached interfaces vpcnet leaves alone.
	Unmanaged []UnmanagedENI
	Routed    []Route
}

// Route is an address the host routes to a pod, and the host veth it
// goes to ("" when the host cannot say).
type Route struct {
	Addr netip.Addr
	Link string
}

// Event is an input to Step.
type Event interface{ event() }

// AddRequest asks for an address for Key. ID names the reply.
type AddRequest struct {
	ID  uint64
	Key ipam.Key
	Pod ipam.Pod
}

// DelRequest gives Key's address back.
type DelRequest struct {
	ID  uint64
	Key ipam.Key
}

// GCRequest releases every assignment of Network whose key is not in
// Valid, once older than the cooldown.
type GCRequest struct {
	ID      uint64
	Network string
	Valid   map[ipam.Key]bool
}

// JobGrant says the cluster's EC2 budget granted job JobID's calls
// (Job.Calls): the job calls EC2 now. Adds that the addresses it brings
// will serve wait for them past their deadline, within the plugin's
// patience (AnswerSlack): an Add failed moments before its address
// comes costs its pod kubelet's backoff (10 to 15 s) and a new sandbox.
// Every job that lists calls is told granted once before it runs, also
// without a budget.
type JobGrant struct{ JobID uint64 }

// Cancel says the caller of request ID has gone (the plugin's deadline);
// a waiting Add stops waiting but still counts as demand.
type Cancel struct{ ID uint64 }

// Tick says time has passed; the machine looks at what came due.
type Tick struct{}

// ResyncNow reads EC2 and the host again now rather than at the next
// periodic pass (an operator's or a test's request).
type ResyncNow struct{}

// Persisted acknowledges the Persist of Version.
type Persisted struct {
	Version uint64
	Err     error
}

// ENIConfigUpdate is the node's ENIConfig verdict, with custom networking.
type ENIConfigUpdate struct {
	OK             bool
	Message        string
	SubnetID       string
	SecurityGroups []string
}

// CordonUpdate says whether the pool is held because the node is cordoned
// (its Node tainted node.kubernetes.io/unschedulable:NoSchedule) and
// AWS_MANAGE_ENIS_NON_SCHEDULABLE is false. While Hold, no address is
// assigned, no ENI attached and none detached, as in the Amazon VPC CNI
// (ipamd's isENIAttachmentAllowed and tryFreeENI), so a node being
// drained takes nothing more from the subnet and keeps what its pods may
// still use; surplus addresses are still released, as there.
type CordonUpdate struct {
	Hold bool
}

// MaxPodsUpdate is the node's max pods as the shell last learned it (the
// kubelet's, MAX_PODS or the EKS rule): the pool never grows past what
// this many pods can use. Values below 1 are ignored.
type MaxPodsUpdate struct {
	MaxPods int
}

// ResyncResult is what EC2 says is attached to the instance.
type ResyncResult struct {
	JobID     uint64
	ENIs      []ENIInfo
	Devices   []int
	Unmanaged []UnmanagedENI
	// IMDSDigest summarises the instance's interfaces as IMDS showed them
	// just before EC2 was read ("" when IMDS could not say).
	IMDSDigest string
	// Unchanged says IMDS still showed Job.IMDSDigest, so EC2 was not
	// read: ENIs, Devices and Unmanaged are empty and mean nothing.
	Unchanged bool
	// Changed says IMDS no longer shows Job.IMDSDigest and EC2 was not
	// read either: the machine asks EC2 in a job of its own, which a
	// cluster-wide budget can grant (Job.Calls).
	Changed bool
	Err     error
}

// HostResult is the host's pod routes.
type HostResult struct {
	JobID  uint64
	Routed []Route
	Err    error
}

// ActionResult is the outcome of a JobAction.
type ActionResult struct {
	JobID uint64
	// Blocks are the blocks EC2 assigned (AssignBlocks) or released
	// (ReleaseBlocks).
	Blocks []netip.Prefix
	// ENIID and AttachmentID name the ENI AttachENI created and attached;
	// DeleteOnTermination says whether setting it succeeded.
	ENIID               string
	AttachmentID        string
	DeleteOnTermination bool
	// MAC is the created ENI's, so its attachment can be watched in IMDS.
	MAC string
	// Leftover names an ENI AttachENI created but could not attach, and
	// could not delete either: it holds subnet addresses nobody uses
	// until it is deleted, which the machine retries until EC2 confirms.
	Leftover string
	// Routed is set when a release or detach was declined because the
	// host routes into it.
	Routed []Route
	// Skipped says the action was declined at the last moment without
	// an EC2 change (not attached per EC2, or routed on the host).
	Skipped bool
	// SubnetID is the subnet AttachENI created the ENI in (with subnet
	// discovery, not always the action's), or the last one it tried.
	SubnetID string
	// SubnetFree is the subnet's free address count as EC2 gave it after
	// the action failed for want of a free /28 (InsufficientCidrBlocks);
	// -1 when unknown.
	SubnetFree int
	Err        error
}

// AttachResult answers JobConfirmAttach: the ENI once EC2 says it is
// attached and its host side is set up, or not yet.
type AttachResult struct {
	JobID  uint64
	ENI    ENIInfo
	NotYet bool
	// IMDSOnly says the answer came from IMDS alone (no EC2 call).
	IMDSOnly bool
	// AskEC2 says EC2 is to be asked now, in a job of its own (which a
	// cluster-wide budget can grant, see Job.Calls): IMDS shows the
	// interface, or could not answer (IMDSFailed).
	AskEC2, IMDSFailed bool
	Err                error
}

// DOTResult answers JobSetDeleteOnTermination.
type DOTResult struct {
	JobID uint64
	Err   error
}

// DeleteResult answers JobDeleteENI; NotYet says EC2 still detaches it.
type DeleteResult struct {
	JobID  uint64
	NotYet bool
	Err    error
}

func (SubnetPressure) event()  {}
func (BudgetFailover) event()  {}
func (AddRequest) event()      {}
func (DelRequest) event()      {}
func (GCRequest) event()       {}
func (Cancel) event()          {}
func (JobGrant) event()        {}
func (Tick) event()            {}
func (ResyncNow) event()       {}
func (Persisted) event()       {}
func (ENIConfigUpdate) event() {}
func (MaxPodsUpdate) event()   {}
func (CordonUpdate) event()    {}
func (ResyncResult) event()    {}
func (HostResult) event()      {}
func (ActionResult) event()    {}
func (AttachResult) event()    {}
func (DOTResult) event()       {}
func (DeleteResult) event()    {}

// JobKind says what a Job asks the executor to do.
type JobKind int

const (
	// JobResync lists the ENIs attached to the instance; new secondary
	// ENIs (not in Known) get their host side set up first.
	JobResync JobKind = iota + 1
	// JobHostCheck reads the host's pod routes.
	JobHostCheck
	// JobAction performs a planner action. A release or detach first
	// confirms with EC2 that the ENI is attached here and re-reads the
	// host's pod routes, and declines if anything routes into it. An
	// attach creates and attaches the ENI at Device and sets
	// DeleteOnTermination; it does not wait for the attachment.
	JobAction
	// JobConfirmAttach asks EC2 whether ENIID is attached yet and, once it
	// is, sets up its host side.
	JobConfirmAttach
	// JobSetDeleteOnTermination sets DeleteOnTermination on ENIID.
	JobSetDeleteOnTermination
	// JobDeleteENI deletes a detached ENIID, or one whose attach failed,
	// once EC2 says it is available.
	JobDeleteENI
)

func (k JobKind) String() string {
	switch k {
	case JobResync:
		return "resync"
	case JobHostCheck:
		return "host-check"
	case JobAction:
		return "action"
	case JobConfirmAttach:
		return "confirm-attach"
	case JobSetDeleteOnTermination:
		return "set-delete-on-termination"
	case JobDeleteENI:
		return "delete-eni"
	}
	return "unknown"
}

// Job is one piece of I/O the machine wants done.
type Job struct {
	ID     uint64
	Kind   JobKind
	Action ipam.Action
	// Device is the device index for an attach.
	Device int
	// ENIID and AttachmentID for confirm, DeleteOnTermination and delete.
	ENIID        string
	AttachmentID string
	// MAC, for a confirm, says to watch IMDS for the interface first and
	// ask EC2 only once IMDS shows it; empty asks EC2 straight away.
	MAC string
	// Known lists the ENIs already in the pool, for a resync.
	Known []string
	// IMDSDigest, for a resync, lets the executor skip EC2 when IMDS
	// still shows the interfaces it showed at the last EC2 read.
	IMDSDigest string
	// ENI is the detaching ENI, for the host teardown of a detach.
	ENI ENIInfo
}

// Persist asks for the checkpoint State to be written as Version.
type Persist struct {
	Version uint64
	State   checkpoint.State
}

// Reply answers request ID.
type Reply struct {
	ID uint64
	// Assignment is the address given (Add) or released (Del).
	Assignment ipam.Assignment
	// ENI is the Assignment's ENI, for the plugin's routing.
	ENI ipam.ENI
	// Existing says the Add found the key already holding the address.
	Existing bool
	// Released says the Del gave an address back.
	Released bool
	// Gone are the assignments a GC released.
	Gone []ipam.Assignment
	Err  error
}

// Notice is a Kubernetes Event the machine wants recorded; the zero Pod
// means the node's Node.
type Notice struct {
	Pod     ipam.Pod
	Warning bool
	Reason  string
	Message string
}

// Ready is what Step produced: the caller performs it and reports back.
type Ready struct {
	Persist *Persist
	Jobs    []Job
	Replies []Reply
	// Assigned are Adds given an address whose Reply waits for the
	// checkpoint that records it, announced so the shell can prepare
	// what the pod needs besides its address (its NetworkPolicy rules)
	// while that is written: the Add then waits for the longer of the
	// two, not both. An Assigned is no answer: the address is the pod's
	// once its Reply says so, and a failed write takes it back (the
	// Reply then carries the error). Each Add is announced at most once,
	// in the same Ready as or an earlier one than its Reply.
	Assigned []Reply
	Notices  []Notice
	// Wake is when the machine wants a Tick; zero means no timer.
	Wake time.Time
}
