// Package executor performs the agent state machine's jobs against EC2 and
// the host: each job is a short, bounded sequence of calls that returns one
// result event. It holds no node state; the machine (agent/nodestate)
// decides, the executor only does, so a simulation can run the same code
// against the local cloud in whatever order it likes.
package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/limits"
)

// Cloud is what the agent asks of EC2 and IMDS. *cloud.Client implements
// it; every call is rate limited, retried and measured there.
type Cloud interface {
	DescribeSelf(ctx context.Context) (cloud.Self, error)
	IMDSShowsMAC(ctx context.Context, mac string) (bool, error)
	InstanceLimits(ctx context.Context, instanceType string) (limits.Limits, error)
	DescribeSubnets(ctx context.Context, ids ...string) ([]cloud.Subnet, error)
	SubnetsInZone(ctx context.Context, vpcID, az string) ([]cloud.Subnet, error)
	ListENIs(ctx context.Context, f cloud.ENIFilter) ([]cloud.ENI, error)
	DescribeENIs(ctx context.Context, ids ...string) ([]cloud.ENI, error)
	CreateENI(ctx context.Context, in cloud.CreateENIInput) (cloud.ENI, error)
	AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error)
	SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string, on bool) error
	DetachENI(ctx context.Context, attachmentID string, force bool) error
	DeleteENI(ctx context.Context, eniID string) error
	AssignAddresses(ctx context.Context, eniID string, count int) ([]netip.Addr, error)
	AssignPrefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error)
	AssignIPv6Prefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error)
	UnassignAddresses(ctx context.Context, eniID string, addrs []netip.Addr) error
	UnassignPrefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) error
	// DryRun asks whether the credentials may call action (nil: yes).
	DryRun(ctx context.Context, action string, t cloud.DryRunTarget) error
}

var _ Cloud = (*cloud.Client)(nil)

// Host is the node's own networking: the dataplane package implements it
// with netlink and nftables; tests use a fake.
type Host interface {
	// Setup makes the node-wide dataplane (rules, SNAT, connmark,
	// rp_filter) match the settings. Idempotent.
	Setup(ctx context.Context, n NodeNet) error
	// SetupENI brings a newly attached secondary ENI up with its own route
	// table; TeardownENI removes what SetupENI made. Both idempotent.
	SetupENI(ctx context.Context, e ENINet) error
	TeardownENI(ctx context.Context, e ENINet) error
	// PodAddrs lists the addresses the host routes to a pod's veth, with
	// the veth: proof, independent of the checkpoint, that a pod still
	// uses them, and which.
	PodAddrs(ctx context.Context) ([]nodestate.Route, error)
}

// NodeNet is what host setup needs to know about the node.
type NodeNet struct {
	PrimaryMAC       string
	PrimaryIP        netip.Addr
	VPCCIDRs         []netip.Prefix
	ExcludeSNATCIDRs []netip.Prefix
	ExternalSNAT     bool
	RandomizeSNAT    string
	MTU              int
	// DenyPodIMDS drops pods' packets to the instance metadata service
	// (VPCNET_POD_IMDS=deny).
	DenyPodIMDS bool
	// IPv6 says pods get IPv6 addresses (ENABLE_IPv6=true), which the
	// host must be able to route before the agent asks EC2 for them.
	IPv6 bool
}

// ENINet is one secondary ENI as the host sees it.
type ENINet struct {
	ID          string
	MAC         string
	DeviceIndex int
	PrimaryIP   netip.Addr
	SubnetCIDR  netip.Prefix
	MTU         int
}

// TagNoManage is the Amazon VPC CNI's opt-out: an ENI carrying it belongs
// to someone else (a trunk, EFA, a user's own interface) and is never used.
const TagNoManage = "node.k8s.amazonaws.com/no_manage"

// Executor runs jobs. It is safe for concurrent use.
type Executor struct {
	Cloud      Cloud
	Host       Host
	InstanceID string
	// Self is IMDS's view of the node, for subnet CIDRs without a call.
	Self cloud.Self
	// ENIMTU is the MTU of secondary ENIs.
	ENIMTU int
	// Tags are added to every ENI created (ADDITIONAL_ENI_TAGS).
	Tags map[string]string
	// SubnetDiscovery is ENABLE_SUBNET_DISCOVERY: new ENIs may go to the
	// subnets of the node's VPC and zone tagged kubernetes.io/role/cni.
	// CustomNetwork (an ENIConfig's subnet) turns it off.
	SubnetDiscovery bool
	CustomNetwork   bool
	// ClusterName is CLUSTER_NAME: a subnet tagged for other clusters
	// only (TagClusterPrefix) gets no ENI. Empty skips that check.
	ClusterName string
	// Now is the clock the subnet cache ages by; nil is the wall clock.
	Now func() time.Time

	// mu guards subnets, subnet CIDRs learned from EC2; the primary
	// ENI's connection-tracking timeouts as EC2 last described them
	// (primaryCT, known once primaryCTRead), which every ENI created
	// carries (see attach); the node's VPC (vpcID, "" until read) and
	// the subnets new ENIs may go to as last read (zone, see subnets.go);
	// and created, the subnet of each ENI this executor created, which
	// its confirm describes.
	mu            sync.Mutex
	subnets       map[string]netip.Prefix
	primaryCT     cloud.ConnTrack
	primaryCTRead bool
	vpcID         string
	zone          *zoneSubnets
	created       map[string]string
	// booked are the subnets an attach job was booked with (Calls), by
	// job id, until it runs.
	booked map[uint64]*zoneSubnets
}

// Run performs job and returns its result event.
func (x *Executor) Run(ctx context.Context, job nodestate.Job) nodestate.Event {
	switch job.Kind {
	case nodestate.JobResync:
		// IMDS first, before EC2: a change landing between the two reads
		// then shows as a different digest next time.
		digest := imdsDigest(ctx, x.Cloud)
		if job.IMDSDigest != "" {
			// A job that watches IMDS reads nothing else: the machine
			// asks EC2 in a job of its own when IMDS changed.
			same := digest == job.IMDSDigest
			return nodestate.ResyncResult{JobID: job.ID, IMDSDigest: digest, Unchanged: same, Changed: !same}
		}
		at, err := x.Attached(ctx, job.Known)
		return nodestate.ResyncResult{JobID: job.ID, ENIs: at.ENIs, Devices: at.Devices, Unmanaged: at.Unmanaged, IMDSDigest: digest, Err: err}
	case nodestate.JobHostCheck:
		routed, err := x.Host.PodAddrs(ctx)
		if err != nil {
			err = fmt.Errorf("read host pod routes: %w", err)
		}
		return nodestate.HostResult{JobID: job.ID, Routed: routed, Err: err}
	case nodestate.JobAction:
		return x.action(ctx, job)
	case nodestate.JobConfirmAttach:
		return x.confirmAttach(ctx, job)
	case nodestate.JobSetDeleteOnTermination:
		err := x.Cloud.SetDeleteOnTermination(ctx, job.ENIID, job.AttachmentID, true)
		return nodestate.DOTResult{JobID: job.ID, Err: err}
	case nodestate.JobDeleteENI:
		return x.deleteENI(ctx, job)
	}
	panic(fmt.Sprintf("executor: unknown job kind %v", job.Kind))
}

// imdsDigest summarises the interfaces IMDS shows (each one's MAC, id,
// device, addresses and prefixes, IPv6 /80s included), or "" when IMDS
// cannot say.
func imdsDigest(ctx context.Context, c Cloud) string {
	self, err := c.DescribeSelf(ctx)
	if err != nil {
		return ""
	}
	ifs := slices.Clone(self.Interfaces)
	slices.SortFunc(ifs, func(a, b cloud.Interface) int { return strings.Compare(a.MAC, b.MAC) })
	h := sha256.New()
	for _, i := range ifs {
		fmt.Fprintf(h, "%s %s %d %v %v %v %v\n", i.MAC, i.ID, i.DeviceNumber, i.IPv4s, i.Prefixes, i.SecurityGroups, i.IPv6Prefixes)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Attached is what EC2 says is attached to the instance.
type Attached struct {
	// ENIs are ours to use, by device index.
	ENIs []nodestate.ENIInfo
	// Devices are the device indexes taken on network card 0 (the only
	// card vpcnet attaches to), by any ENI.
	Devices []int
	// Unmanaged are the interfaces vpcnet leaves alone.
	Unmanaged []nodestate.UnmanagedENI
}

// Attached lists the ENIs EC2 says are attached to the instance: ours to
// use, with the host side of each new secondary one (not in known) set
// up; the device indexes taken on network card 0; and the interfaces
// that are not vpcnet's, which are never set up.
func (x *Executor) Attached(ctx context.Context, known []string) (Attached, error) {
	enis, err := x.Cloud.ListENIs(ctx, cloud.ENIFilter{InstanceID: x.InstanceID})
	if err != nil {
		return Attached{}, fmt.Errorf("list ENIs attached to %s: %w", x.InstanceID, err)
	}
	x.notePrimaryIn(enis)
	return x.attached(ctx, enis, known)
}

// Boot is Attached at start-up, which also reads the subnets new ENIs
// may go to, in the one DescribeSubnets call start-up's grant books: the
// secondary ENIs' subnets are among them, and the node's attaches and
// confirms in the next subnetsTTL need no DescribeSubnets of their own.
// A grant that books a read only because an attach may make it is
// booked at the attach's slot, behind the whole cluster's creates, and
// every request naming that read then waits behind them too (a 300-node
// join's attachment confirms waited 44 s).
func (x *Executor) Boot(ctx context.Context) (Attached, error) {
	enis, err := x.Cloud.ListENIs(ctx, cloud.ENIFilter{InstanceID: x.InstanceID})
	if err != nil {
		return Attached{}, fmt.Errorf("list ENIs attached to %s: %w", x.InstanceID, err)
	}
	x.notePrimaryIn(enis)
	if !x.CustomNetwork && x.cachedSubnets() == nil {
		// A failed read is not start-up's failure: each subnet is then
		// described as it is met, and the first create reads again.
		_, _, _ = x.readSubnets(ctx, ipam.Action{SubnetID: x.Self.Primary.SubnetID})
	}
	return x.attached(ctx, enis, nil)
}

// notePrimaryIn keeps what the primary ENI's listing says (its
// connection tracking and VPC).
func (x *Executor) notePrimaryIn(enis []cloud.ENI) {
	for _, e := range enis {
		if a := e.Attachment; a != nil && a.InstanceID == x.InstanceID && a.NetworkCardIndex == 0 && a.DeviceIndex == 0 {
			x.notePrimary(e)
		}
	}
}

func (x *Executor) attached(ctx context.Context, enis []cloud.ENI, known []string) (Attached, error) {
	var out Attached
	for _, e := range enis {
		if e.Attachment == nil || e.Attachment.InstanceID != x.InstanceID {
			continue
		}
		if e.Attachment.NetworkCardIndex == 0 {
			out.Devices = append(out.Devices, e.Attachment.DeviceIndex)
		}
		if why := UnmanagedReason(e); why != "" {
			out.Unmanaged = append(out.Unmanaged, nodestate.UnmanagedENI{ID: e.ID, NetworkCard: e.Attachment.NetworkCardIndex,
				DeviceIndex: e.Attachment.DeviceIndex, Reason: why})
			continue
		}
		if e.Attachment.State != cloud.AttachmentAttached {
			continue
		}
		info, err := x.info(ctx, e, !slices.Contains(known, e.ID))
		if err != nil {
			return Attached{}, err
		}
		out.ENIs = append(out.ENIs, info)
	}
	slices.SortFunc(out.ENIs, func(a, b nodestate.ENIInfo) int { return a.DeviceIndex - b.DeviceIndex })
	slices.SortFunc(out.Unmanaged, func(a, b nodestate.UnmanagedENI) int {
		if a.NetworkCard != b.NetworkCard {
			return a.NetworkCard - b.NetworkCard
		}
		return a.DeviceIndex - b.DeviceIndex
	})
	slices.Sort(out.Devices)
	return out, nil
}

// UnmanagedReason says why an attached interface is not vpcnet's to use,
// or "" when it is: the Amazon VPC CNI's rules. A trunk belongs to the
// VPC resource controller (security groups for pods), EFA and efa-only
// interfaces to the workloads that use them, interfaces on network cards
// other than 0 to whoever put them there (vpcnet attaches to card 0
// only), and a no_manage tag is the operator's opt-out.
func UnmanagedReason(e cloud.ENI) string {
	switch {
	case e.Tags[TagNoManage] == "true":
		return "tagged " + TagNoManage + "=true"
	case e.InterfaceType != "" && e.InterfaceType != "interface":
		return "interface type " + e.InterfaceType
	case e.Attachment != nil && e.Attachment.NetworkCardIndex != 0:
		return fmt.Sprintf("on network card %d", e.Attachment.NetworkCardIndex)
	}
	return ""
}

// info turns an attached ENI into what the machine adopts; a new secondary
// ENI gets its host side set up first, so no pod is given an address the
// host cannot route yet.
func (x *Executor) info(ctx context.Context, e cloud.ENI, setup bool) (nodestate.ENIInfo, error) {
	cidr, err := x.subnetCIDR(ctx, e.SubnetID)
	if err != nil {
		return nodestate.ENIInfo{}, err
	}
	info := nodestate.ENIInfo{
		ID: e.ID, DeviceIndex: e.Attachment.DeviceIndex, SubnetID: e.SubnetID, SubnetCIDR: cidr,
		SecurityGroups: e.SecurityGroups, PrimaryIP: e.PrimaryIP, MAC: e.MAC, AttachmentID: e.Attachment.ID,
		DeleteOnTermination: e.Attachment.DeleteOnTermination, Blocks: blocksOf(e),
		SubnetIPv6CIDR: x.subnetIPv6CIDR(e.SubnetID),
	}
	if t, err := time.Parse(time.RFC3339, e.Tags[cloud.TagCreatedAt]); err == nil {
		info.CreatedAt = t
	}
	if setup && info.DeviceIndex != 0 {
		if err := x.Host.SetupENI(ctx, eniNet(info, x.ENIMTU)); err != nil {
			info.HostErr = fmt.Errorf("set up host side of %s: %w", e.ID, err)
		}
	}
	return info, nil
}

func eniNet(e nodestate.ENIInfo, mtu int) ENINet {
	return ENINet{ID: e.ID, MAC: e.MAC, DeviceIndex: e.DeviceIndex, PrimaryIP: e.PrimaryIP, SubnetCIDR: e.SubnetCIDR, MTU: mtu}
}

func blocksOf(e cloud.ENI) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(e.SecondaryIPs)+len(e.Prefixes))
	for _, ip := range e.SecondaryIPs {
		out = append(out, netip.PrefixFrom(ip, 32))
	}
	out = append(out, e.Prefixes...)
	return append(out, e.IPv6Prefixes...)
}

// subnetIPv6CIDR is a subnet's IPv6 /64 as IMDS shows it for one of the
// node's interfaces, or the invalid Prefix: IPv6 mode uses the primary
// ENI only, whose subnet start-up found in IMDS (ipv6Refusal), so no EC2
// call is spent on it.
func (x *Executor) subnetIPv6CIDR(subnetID string) netip.Prefix {
	for _, i := range x.Self.Interfaces {
		if i.SubnetID == subnetID && len(i.SubnetIPv6CIDRs) > 0 {
			return i.SubnetIPv6CIDRs[0]
		}
	}
	if x.Self.Primary.SubnetID == subnetID && len(x.Self.Primary.SubnetIPv6CIDRs) > 0 {
		return x.Self.Primary.SubnetIPv6CIDRs[0]
	}
	return netip.Prefix{}
}

// subnetCIDR finds a subnet's CIDR, from IMDS's view of the node when it
// has it, else from EC2 (once per subnet).
func (x *Executor) subnetCIDR(ctx context.Context, subnetID string) (netip.Prefix, error) {
	x.mu.Lock()
	cidr, ok := x.subnets[subnetID]
	for _, i := range x.Self.Interfaces {
		if !ok && i.SubnetID == subnetID && i.SubnetCIDR.IsValid() {
			cidr, ok = i.SubnetCIDR, true
		}
	}
	x.mu.Unlock()
	if ok {
		return cidr, nil
	}
	subnets, err := x.Cloud.DescribeSubnets(ctx, subnetID)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("describe subnet %s: %w", subnetID, err)
	}
	if len(subnets) != 1 {
		return netip.Prefix{}, fmt.Errorf("describe subnet %s: EC2 returned %d subnets", subnetID, len(subnets))
	}
	x.mu.Lock()
	if x.subnets == nil {
		x.subnets = make(map[string]netip.Prefix)
	}
	x.subnets[subnetID] = subnets[0].CIDR
	x.mu.Unlock()
	return subnets[0].CIDR, nil
}

func (x *Executor) action(ctx context.Context, job nodestate.Job) nodestate.Event {
	act := job.Action
	res := nodestate.ActionResult{JobID: job.ID}
	switch act.Kind {
	case ipam.AssignBlocks:
		res.Blocks, res.Err = x.assign(ctx, act)
	case ipam.AttachENI:
		x.attach(ctx, act, job.Device, x.bookedSubnets(job.ID), &res)
	case ipam.ReleaseBlocks:
		res = x.release(ctx, job)
	case ipam.DetachENI:
		res = x.detach(ctx, job)
	default:
		panic(fmt.Sprintf("executor: unknown planner action %v", act.Kind))
	}
	if cloud.IsSubnetFragmented(res.Err) {
		subnet := act.SubnetID
		if res.SubnetID != "" {
			subnet = res.SubnetID
		}
		res.SubnetFree = subnetFree(ctx, x.Cloud, subnet)
	}
	return res
}

// subnetFree is EC2's count of the subnet's free addresses, -1 when it
// cannot say: with InsufficientCidrBlocks it tells a fragmented subnet
// (addresses left, no whole /28) from a full one.
func subnetFree(ctx context.Context, c Cloud, subnetID string) int {
	if subnetID == "" {
		return -1
	}
	subnets, err := c.DescribeSubnets(ctx, subnetID)
	if err != nil || len(subnets) != 1 {
		return -1
	}
	return subnets[0].AvailableAddresses
}

func (x *Executor) assign(ctx context.Context, act ipam.Action) ([]netip.Prefix, error) {
	if act.IPv6 {
		return x.Cloud.AssignIPv6Prefixes(ctx, act.ENIID, act.Count)
	}
	if act.Prefixes {
		return x.Cloud.AssignPrefixes(ctx, act.ENIID, act.Count)
	}
	ips, err := x.Cloud.AssignAddresses(ctx, act.ENIID, act.Count)
	blocks := make([]netip.Prefix, 0, len(ips))
	for _, ip := range ips {
		blocks = append(blocks, netip.PrefixFrom(ip, 32))
	}
	return blocks, err
}

// attach creates an ENI that already carries its addresses and our tags
// (one call), attaches it at device dev and sets DeleteOnTermination. It
// does not wait for the attachment: the machine polls with
// JobConfirmAttach. An ENI that failed to attach is deleted, unless EC2
// may have attached it after all (then the next resync adopts it); when
// that delete fails too (throttled, a 5xx) the result names the ENI as
// Leftover, and the machine deletes it until EC2 confirms it is gone.
func (x *Executor) attach(ctx context.Context, act ipam.Action, dev int, booked *zoneSubnets, res *nodestate.ActionResult) {
	in := cloud.CreateENIInput{
		SecurityGroups: act.SecurityGroups,
		// The device index makes creates started at the same instant for
		// different devices differ: the ClientToken is derived from the
		// input, and two equal inputs would be answered with one ENI.
		Description: fmt.Sprintf("vpcnet pod addresses for %s, device %d", x.InstanceID, dev), Tags: x.Tags,
	}
	if act.Prefixes {
		in.Prefixes = act.Count
	} else {
		in.SecondaryAddresses = act.Count
	}
	ct, err := x.primaryConnTrack(ctx)
	if err != nil {
		res.Err = err
		return
	}
	in.ConnTrack = ct
	subnets, err := x.createSubnets(ctx, act, booked)
	if err != nil {
		res.Err = err
		return
	}
	eni, subnet, err := createENI(ctx, x.Cloud, in, subnets)
	res.SubnetID = subnet
	if subnetMoved(err) || (err == nil && len(subnets) > 0 && subnet != subnets[0]) {
		// A subnet was full or is gone: the cached read's free counts
		// (and maybe its subnets) no longer hold. The next create reads
		// them again, and finds a subnet tagged meanwhile.
		x.forgetSubnets()
	}
	if err != nil {
		res.Err = err
		return
	}
	res.ENIID = eni.ID
	x.mu.Lock()
	if x.created == nil {
		x.created = map[string]string{}
	}
	x.created[eni.ID] = subnet
	x.mu.Unlock()
	attachmentID, err := x.Cloud.AttachENI(ctx, eni.ID, x.InstanceID, dev)
	if err != nil {
		res.Err = err
		// Deleting fails harmlessly ("in use") if EC2 did attach it. Any
		// other failure leaves an available ENI holding subnet addresses
		// that nobody uses: the machine keeps deleting it.
		if derr := x.Cloud.DeleteENI(context.WithoutCancel(ctx), eni.ID); derr != nil && !cloud.IsNotFound(derr) {
			res.Leftover = eni.ID
		}
		return
	}
	res.MAC, res.AttachmentID = eni.MAC, attachmentID
	// A failure here is not the attach's: the machine retries it.
	res.DeleteOnTermination = x.Cloud.SetDeleteOnTermination(ctx, eni.ID, attachmentID, true) == nil
}

func (x *Executor) confirmAttach(ctx context.Context, job nodestate.Job) nodestate.Event {
	res := nodestate.AttachResult{JobID: job.ID}
	if job.MAC != "" {
		// IMDS first: it costs none of the account's EC2 budget, and
		// once it shows the interface EC2 surely has attached it. It
		// lags EC2, so the machine also asks EC2 once when the attach
		// should be done (an empty MAC). When IMDS shows it, or cannot
		// answer, the machine asks EC2 in a job of its own, which a
		// cluster-wide budget grants (Job.Calls).
		shown, err := x.Cloud.IMDSShowsMAC(ctx, job.MAC)
		res.NotYet, res.IMDSOnly = true, true
		res.AskEC2, res.IMDSFailed = shown || err != nil, err != nil
		return res
	}
	enis, err := x.Cloud.DescribeENIs(ctx, job.ENIID)
	if err != nil {
		res.Err = fmt.Errorf("describe %s: %w", job.ENIID, err)
		return res
	}
	if len(enis) != 1 || enis[0].Attachment == nil || enis[0].Attachment.InstanceID != x.InstanceID || enis[0].Attachment.State != cloud.AttachmentAttached {
		res.NotYet = true
		return res
	}
	res.ENI, res.Err = x.info(ctx, enis[0], true)
	if res.Err == nil && res.ENI.HostErr != nil {
		res.Err = res.ENI.HostErr
	}
	return res
}

// errNotAttached declines a release or detach: EC2, not IMDS, must confirm
// the ENI is attached here; nothing is released on a hint.
var errNotAttached = errors.New("not attached to this instance in EC2")

func (x *Executor) confirmAttached(ctx context.Context, eniID string) (cloud.ENI, error) {
	enis, err := x.Cloud.DescribeENIs(ctx, eniID)
	if err != nil {
		return cloud.ENI{}, err
	}
	if len(enis) != 1 || enis[0].Attachment == nil || enis[0].Attachment.InstanceID != x.InstanceID {
		return cloud.ENI{}, fmt.Errorf("%s: %w", eniID, errNotAttached)
	}
	if why := UnmanagedReason(enis[0]); why != "" {
		// Never release from or detach an interface that is not ours,
		// whatever the machine believes.
		return cloud.ENI{}, fmt.Errorf("%s is not vpcnet's (%s): %w", eniID, why, errNotAttached)
	}
	return enis[0], nil
}

// release gives back blocks that are provably unused: attached to this
// instance per EC2, out of the pool (the machine took them out), and
// routed to no pod on the host, read again right now.
func (x *Executor) release(ctx context.Context, job nodestate.Job) nodestate.ActionResult {
	act := job.Action
	res := nodestate.ActionResult{JobID: job.ID}
	eni, routed, ok := x.beforeShrink(ctx, act.ENIID, "release", &res)
	if !ok {
		return res
	}
	onENI := blocksOf(eni)
	var give, gone []netip.Prefix
	for _, b := range act.Blocks {
		if !slices.Contains(onENI, b) {
			gone = append(gone, b) // EC2 no longer has it: nothing to give
			continue
		}
		if routesInto(routed, b) {
			res.Routed = routed
			continue
		}
		give = append(give, b)
	}
	res.Blocks = gone
	if len(give) == 0 {
		res.Skipped = len(gone) == 0
		return res
	}
	if err := x.unassign(ctx, act.ENIID, give); err != nil {
		res.Err = err
		return res
	}
	res.Blocks = append(res.Blocks, give...)
	return res
}

// beforeShrink is what every release and detach checks first: EC2 says
// the ENI is attached here, and the host's pod routes, read right now.
// When it says no, res says why (declined, or the error).
func (x *Executor) beforeShrink(ctx context.Context, eniID, what string, res *nodestate.ActionResult) (cloud.ENI, []nodestate.Route, bool) {
	eni, err := x.confirmAttached(ctx, eniID)
	if errors.Is(err, errNotAttached) {
		res.Skipped = true
		return cloud.ENI{}, nil, false
	}
	if err != nil {
		res.Err = err
		return cloud.ENI{}, nil, false
	}
	routed, err := x.Host.PodAddrs(ctx)
	if err != nil {
		res.Err = fmt.Errorf("read host pod routes before %s of %s: %w", what, eniID, err)
		return cloud.ENI{}, nil, false
	}
	return eni, routed, true
}

func (x *Executor) unassign(ctx context.Context, eniID string, blocks []netip.Prefix) error {
	var ips []netip.Addr
	var prefixes []netip.Prefix
	for _, b := range blocks {
		if b.Bits() == 32 {
			ips = append(ips, b.Addr())
		} else {
			prefixes = append(prefixes, b)
		}
	}
	if len(ips) > 0 {
		if err := x.Cloud.UnassignAddresses(ctx, eniID, ips); err != nil {
			return err
		}
	}
	if len(prefixes) > 0 {
		return x.Cloud.UnassignPrefixes(ctx, eniID, prefixes)
	}
	return nil
}

func routesInto(routed []nodestate.Route, b netip.Prefix) bool {
	return slices.ContainsFunc(routed, func(r nodestate.Route) bool { return b.Contains(r.Addr) })
}

// detach removes an ENI the machine took out of the pool, after EC2
// confirms it is attached here and the host routes into none of its
// blocks. Deleting it is a later job, once EC2 says it is available.
func (x *Executor) detach(ctx context.Context, job nodestate.Job) nodestate.ActionResult {
	res := nodestate.ActionResult{JobID: job.ID}
	eni, routed, ok := x.beforeShrink(ctx, job.Action.ENIID, "detach", &res)
	if !ok {
		return res
	}
	for _, b := range blocksOf(eni) {
		if routesInto(routed, b) {
			res.Skipped, res.Routed = true, routed
			return res
		}
	}
	info := job.ENI
	info.MAC, info.PrimaryIP = eni.MAC, eni.PrimaryIP
	// A failed teardown leaves a route table for a gone link: harmless,
	// and the next SetupENI at that device index replaces it.
	_ = x.Host.TeardownENI(ctx, eniNet(info, x.ENIMTU))
	if err := x.Cloud.DetachENI(ctx, eni.Attachment.ID, false); err != nil {
		res.Err = err
	}
	return res
}

func (x *Executor) deleteENI(ctx context.Context, job nodestate.Job) nodestate.Event {
	res := nodestate.DeleteResult{JobID: job.ID}
	enis, err := x.Cloud.DescribeENIs(ctx, job.ENIID)
	switch {
	case cloud.IsNotFound(err):
		return res
	case err != nil:
		res.Err = err
		return res
	case len(enis) == 0:
		return res
	case enis[0].Status != cloud.StatusAvailable:
		res.NotYet = true
		return res
	}
	if err := x.Cloud.DeleteENI(ctx, job.ENIID); err != nil && !cloud.IsNotFound(err) {
		res.Err = err
	}
	return res
}

// Classify tells the machine what kind of EC2 error err is.
func Classify(err error) nodestate.ErrorClass {
	if err == nil {
		return nodestate.ErrorClass{}
	}
	c := nodestate.ErrorClass{
		Code:             cloud.ErrorCode(err),
		Action:           ec2Action(err),
		SubnetExhausted:  cloud.IsSubnetExhausted(err) && !cloud.IsSubnetFragmented(err),
		SubnetFragmented: cloud.IsSubnetFragmented(err),
		AttachmentLimit:  cloud.IsAttachmentLimit(err),
		Throttled:        cloud.IsThrottled(err),
		Unauthorized:     cloud.IsUnauthorized(err),
	}
	c.Refusal = c.SubnetExhausted || c.SubnetFragmented || c.AttachmentLimit || cloud.IsAddressLimit(err) || c.Throttled || c.Unauthorized
	return c
}

// ec2Action names the EC2 API action that failed with err, or "".
func ec2Action(err error) string {
	var op *smithy.OperationError
	if errors.As(err, &op) {
		return op.Operation()
	}
	return ""
}
