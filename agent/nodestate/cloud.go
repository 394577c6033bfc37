package nodestate

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Attachment watching: EC2 attaches in a few seconds. IMDS lists the
// interface once it is attached and costs none of the account's shared
// EC2 budget, so it is read every imdsAttachPoll, and EC2 is asked once,
// when IMDS shows it (IMDS lags EC2: it only says when to ask). An IMDS
// that has not shown it after imdsAttachWatch is not trusted any more:
// EC2 is asked with doubling gaps, as when the MAC is unknown.
const (
	imdsAttachPoll  = 500 * time.Millisecond
	imdsAttachWatch = 30 * time.Second
	firstAttachPoll = 500 * time.Millisecond
	maxAttachPoll   = 4 * time.Second
	ec2FollowUps    = 3
	ec2FollowUp     = 250 * time.Millisecond
	// resyncSoon is how soon EC2 is read again after an action whose
	// outcome is unknown (an attach that reported failure may have
	// happened), so such an ENI is adopted and gets DeleteOnTermination.
	resyncSoon  = 5 * time.Second
	maxDOTRetry = 30 * time.Second
	deleteTries = 12
	deleteRetry = 5 * time.Second
	// maxInFlightAttaches bounds the attachments one node has under way:
	// a burst's attachments start together (burst.go), paced by the EC2
	// client's token buckets, and eight covers every ENI of most
	// instance types.
	maxInFlightAttaches = 8
)

// ErrorClass is what the machine needs to know about an EC2 error; the
// agent classifies errors (Config.Classify) so this package needs no
// cloud client.
type ErrorClass struct {
	// Code is the AWS error code; empty means EC2 did not answer.
	Code string
	// Action is the EC2 API action that failed, when known.
	Action string
	// Refusal says EC2 declined to grow the pool (exhaustion, a limit,
	// throttling, a missing permission) rather than not answering.
	Refusal         bool
	SubnetExhausted bool
	// SubnetFragmented: no free aligned /28 for a prefix
	// (InsufficientCidrBlocks), though single addresses may be left.
	SubnetFragmented bool
	AttachmentLimit  bool
	Throttled        bool
	Unauthorized     bool
}

// attaching is an ENI EC2 is attaching for the pool.
type attaching struct {
	device int
	action ipam.Action
	since  time.Time
	poll   time.Duration
	// mac is watched in IMDS; empty once IMDS is not trusted for it.
	mac string
	// askEC2 is when EC2 is asked once whether the attachment is done,
	// without waiting for IMDS, which lags EC2 by seconds: about when an
	// attach takes, so a burst's pods wait about one attach delay, not
	// one plus IMDS's lag. Zero once asked.
	askEC2 time.Time
	// followUps are the EC2 asks made after that one found the attach
	// not done yet (ec2FollowUps at most, ec2FollowUp apart): an attach
	// a little slower than the last one is then seen within a fraction
	// of a second, not after IMDS's lag.
	followUps int
}

// cloudView is what the machine knows of EC2 beyond the pool.
type cloudView struct {
	plan      ipam.PlanConfig
	eniCfgOK  bool
	eniCfgMsg string
	// cordonHold: the node is cordoned and AWS_MANAGE_ENIS_NON_SCHEDULABLE
	// is false (CordonUpdate).
	cordonHold bool
	// devices are the device indexes EC2 last said are taken.
	devices   map[int]bool
	attaching map[string]*attaching
	dotTries  map[string]int
	delTries  map[string]int
	// leftovers are ENIs created for an attach that failed, which the
	// executor could not delete either, with the deletes tried since:
	// deleted until EC2 confirms it, as DeleteOnTermination is set,
	// since each holds subnet addresses no node can use and the
	// leaked-ENI collector finds it only much later.
	leftovers map[string]int
	grow      growBackoff
	// shrink spaces out releases and detaches after one failed or was
	// declined.
	shrink  growBackoff
	ok      bool
	lastErr string
	// lastShortfall and lastGrowErr explain an empty pool to the plugin.
	lastShortfall ipam.Shortfall
	lastGrowErr   error
	lastPlan      time.Time
	nextResync    time.Time
	// detachWanted is since when every plan has wanted an ENI detached;
	// zero when the last did not.
	detachWanted time.Time
	// throttledAt is when EC2 last answered RequestLimitExceeded.
	throttledAt time.Time
	// imdsDigest is IMDS's view at the last EC2 read, ec2ReadAt when
	// that was; wantEC2 says the next resync must read EC2 whatever IMDS
	// shows (an action's outcome is unknown, or an operator asked).
	imdsDigest string
	ec2ReadAt  time.Time
	wantEC2    bool
	// released are blocks this run gave back, or is giving back, each
	// with the first job whose EC2 read surely comes after the release
	// (releaseInFlight while it runs): a resync that read EC2 earlier
	// still shows the block, and must not bring it back into the pool.
	released map[netip.Prefix]uint64
}

// releaseInFlight marks a block whose release EC2 has not answered.
const releaseInFlight = ^uint64(0)

// notReleased drops from blocks those a release has taken since the
// resync job readBy read EC2, and forgets releases every later read
// shows.
func (x *cloudView) notReleased(blocks []netip.Prefix, readBy uint64) []netip.Prefix {
	return slices.DeleteFunc(slices.Clone(blocks), func(p netip.Prefix) bool {
		after, ok := x.released[p]
		return ok && readBy < after
	})
}

// ec2ResyncEvery is how many resync intervals may pass with EC2 read only
// when IMDS shows a change. IMDS is free; a thousand nodes reading EC2
// every minute spend most of the account's DescribeNetworkInterfaces
// budget (20 per second) on finding nothing. EC2 is still read this often
// for what IMDS cannot show (tags, an attachment another client started).
const ec2ResyncEvery = 10

// resyncSoonFromEC2 reads EC2 within resyncSoon, skipping no EC2 read.
func (x *cloudView) resyncSoonFromEC2(now time.Time) {
	x.nextResync = minTime(x.nextResync, now.Add(resyncSoon))
	x.wantEC2 = true
}

func (c *cloudView) init(plan ipam.PlanConfig, devices []int) {
	c.plan = plan
	c.eniCfgOK = !plan.CustomNetworking
	c.devices = make(map[int]bool)
	for _, d := range devices {
		c.devices[d] = true
	}
	c.attaching = make(map[string]*attaching)
	c.dotTries = make(map[string]int)
	c.delTries = make(map[string]int)
	c.leftovers = make(map[string]int)
	c.released = make(map[netip.Prefix]uint64)
}

// maxLeftoverRetry caps the wait between deletes of a leftover ENI: the
// account's budget is shared, and a throttled delete is not worth
// hammering, but the ENI's addresses are worth having back.
const maxLeftoverRetry = time.Minute

// deleteLeftover starts deleting an ENI whose attach failed.
func (n *Node) deleteLeftover(eniID string, now time.Time) {
	n.log.Warn("ENI whose attach failed could not be deleted; deleting it until EC2 confirms", "eni", eniID)
	n.cloud.leftovers[eniID] = 0
	n.jobs.schedule(now.Add(time.Second), Job{Kind: JobDeleteENI, ENIID: eniID})
}

// leftoverDeleted takes in a delete of a leftover ENI: done once EC2 says
// it is gone, or once it turns out EC2 attached it after all (the resync
// adopts it, and it is the pool's); otherwise tried again, backing off.
func (n *Node) leftoverDeleted(j Job, ev DeleteResult, now time.Time) {
	c := &n.cloud
	if ev.Err == nil && !ev.NotYet {
		delete(c.leftovers, j.ENIID)
		n.log.Info("ENI whose attach failed deleted", "eni", j.ENIID)
		return
	}
	if _, adopted := n.pool.ENI(j.ENIID); adopted || c.attaching[j.ENIID] != nil {
		delete(c.leftovers, j.ENIID)
		return
	}
	if ev.Err != nil {
		n.noteEC2(ev.Err)
	}
	c.leftovers[j.ENIID]++
	wait := min(time.Duration(1<<min(c.leftovers[j.ENIID], 6))*time.Second, maxLeftoverRetry)
	n.log.Warn("ENI whose attach failed not deleted yet; trying again", "eni", j.ENIID, "in", wait.String(), "notYet", ev.NotYet, "err", ev.Err)
	n.jobs.schedule(now.Add(wait), j)
}

func (n *Node) classify(err error) ErrorClass {
	if err == nil || n.cfg.Classify == nil {
		return ErrorClass{}
	}
	return n.cfg.Classify(err)
}

// noteEC2 records whether EC2 answered, for readiness and /v1/status. An
// error with an AWS code is an answer (it said no); only silence counts
// against reachability.
func (n *Node) noteEC2(err error) {
	if err == nil {
		n.cloud.ok = true
		return
	}
	n.cloud.lastErr = err.Error()
	c := n.classify(err)
	if c.Throttled {
		n.cloud.throttledAt = n.last
	}
	if c.Code == "" {
		n.cloud.ok = false
	}
	if c.Unauthorized {
		msg := fmt.Sprintf("EC2 refused %s (%s): grant the node's IAM role ec2:%s, as deploy/iam-policy.json does", c.Action, c.Code, c.Action)
		if c.Action == "" {
			msg = fmt.Sprintf("EC2 refused a call (%s): check the node's IAM role against deploy/iam-policy.json: %v", c.Code, err)
		}
		n.out.Notices = append(n.out.Notices, Notice{Warning: true, Reason: "MissingIAMPermission", Message: msg})
	}
}

// periodic starts the reads that came due and the jobs scheduled for now.
func (n *Node) periodic(now time.Time) {
	if !now.Before(n.cloud.nextResync) {
		n.cloud.nextResync = now.Add(n.cfg.ResyncInterval)
		n.startResync()
		n.startHostCheck()
	}
	if !n.host.nextReclaim.IsZero() && !now.Before(n.host.nextReclaim) {
		n.host.nextReclaim = time.Time{}
		n.startHostCheck()
	}
	for _, j := range n.jobs.due(now) {
		n.job(j)
	}
}

func (n *Node) startResync() {
	if n.jobs.running(kindIs(JobResync)) {
		return
	}
	known := make([]string, 0, 4)
	for _, e := range n.pool.ENIs() {
		known = append(known, e.ID)
	}
	j := Job{Kind: JobResync, Known: known}
	c := &n.cloud
	if !c.wantEC2 && c.imdsDigest != "" && n.last.Sub(c.ec2ReadAt) < ec2ResyncEvery*n.cfg.ResyncInterval {
		j.IMDSDigest = c.imdsDigest
	}
	c.wantEC2 = false
	n.job(j)
}

func (n *Node) startHostCheck() {
	if !n.jobs.running(kindIs(JobHostCheck)) {
		n.job(Job{Kind: JobHostCheck})
	}
}

func (n *Node) onResync(ev ResyncResult, now time.Time) {
	n.jobs.done(ev.JobID)
	if ev.Unchanged {
		return // IMDS shows what it showed at the last EC2 read
	}
	if ev.Changed {
		n.cloud.wantEC2 = true
		n.startResync() // EC2 now, in a job a budget can grant
		return
	}
	n.noteEC2(ev.Err)
	if ev.Err != nil {
		n.log.Warn("reading attached ENIs from EC2 failed; trying again at the next pass", "err", ev.Err)
		n.cloud.wantEC2 = true
		return
	}
	n.cloud.imdsDigest, n.cloud.ec2ReadAt = ev.IMDSDigest, now
	n.cloud.devices = make(map[int]bool, len(ev.Devices))
	for _, d := range ev.Devices {
		n.cloud.devices[d] = true
	}
	n.unmanaged.set(n, ev.Unmanaged)
	attached := make(map[string]ENIInfo, len(ev.ENIs))
	for _, e := range ev.ENIs {
		e.Blocks = n.familyBlocks(e.DeviceIndex, n.cloud.notReleased(e.Blocks, ev.JobID))
		attached[e.ID] = e
		if err := n.adopt(e, now); err != nil {
			n.log.Error("ENI attached in EC2 not taken into the pool", "eni", e.ID, "err", err)
		}
	}
	n.dropVanished(attached, now)
	for p, after := range n.cloud.released {
		if ev.JobID >= after && after != releaseInFlight {
			delete(n.cloud.released, p) // this read came after the release
		}
	}
}

// adopt brings an attached ENI and its blocks into the pool; its host side
// was set up by the job that found it. Routed addresses in new blocks are
// quarantined before any pod can be given them.
func (n *Node) adopt(e ENIInfo, now time.Time) error {
	if _, busy := n.detaching(e.ID); busy {
		return nil // on its way out: a resync raced the detach
	}
	e.Blocks = n.familyBlocks(e.DeviceIndex, e.Blocks)
	_, known := n.pool.ENI(e.ID)
	if !known {
		if e.HostErr != nil {
			return fmt.Errorf("host side of %s: %w", e.ID, e.HostErr)
		}
		created := e.CreatedAt
		if created.IsZero() {
			created = now
		}
		if err := n.pool.AddENI(ipam.ENI{ID: e.ID, DeviceIndex: e.DeviceIndex, Primary: e.DeviceIndex == 0, SubnetID: e.SubnetID,
			SubnetCIDR: e.SubnetCIDR, SubnetIPv6CIDR: e.SubnetIPv6CIDR, SecurityGroups: e.SecurityGroups, PrimaryIP: e.PrimaryIP, CreatedAt: created}); err != nil {
			return fmt.Errorf("adopt %s: %w", e.ID, err)
		}
		n.log.Info("ENI in use by the pool", "eni", e.ID, "device", e.DeviceIndex, "subnet", e.SubnetID, "blocks", len(e.Blocks))
		delete(n.cloud.attaching, e.ID)
	}
	n.meta[e.ID] = eniMeta{MAC: e.MAC, AttachmentID: e.AttachmentID, DOT: e.DeleteOnTermination}
	have := make(map[netip.Prefix]bool)
	for _, es := range n.pool.Snapshot(now).ENIs {
		for _, b := range es.Blocks {
			have[b.Prefix] = true
		}
	}
	unused := 0
	for _, p := range e.Blocks {
		if have[p] {
			continue
		}
		if n.offSubnet(e.DeviceIndex, e.SubnetID) && !n.usesPrimaryBlock(p) {
			unused++
			continue
		}
		if err := n.pool.AddBlock(e.ID, p); err != nil {
			return fmt.Errorf("adopt %s on %s: %w", p, e.ID, err)
		}
		n.quarantineRoutedIn(p, now)
	}
	if unused > 0 && !known {
		n.log.Warn("custom networking: the primary ENI's secondary addresses are not used for pods; they stay assigned in EC2 until the node is replaced",
			"eni", e.ID, "blocks", unused)
	}
	if !e.DeleteOnTermination && e.AttachmentID != "" {
		n.setDOT(e.ID, e.AttachmentID)
	}
	return nil
}

func (n *Node) quarantineRoutedIn(p netip.Prefix, now time.Time) {
	for ip := range n.host.routed {
		if p.Contains(ip) {
			n.quarantineIfFree(ip, now, false)
		}
	}
}

// usesPrimaryBlock: with custom networking only primary-ENI blocks that
// the checkpoint being restored holds are used, until they are free.
// offSubnet says, with custom networking, whether new pods must not get
// addresses of an ENI: the primary always, and once the ENIConfig is
// known, any ENI outside its subnet (left from before the switch).
func (n *Node) offSubnet(device int, subnetID string) bool {
	if !n.cfg.CustomNetwork {
		return false
	}
	return device == 0 || (n.cloud.eniCfgOK && subnetID != n.cloud.plan.SubnetID)
}

func (n *Node) usesPrimaryBlock(p netip.Prefix) bool {
	for ip := range n.ckAddrs {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// setDOT asks for DeleteOnTermination on an ENI of the node unless a
// request is already under way.
func (n *Node) setDOT(eniID, attachmentID string) {
	if n.jobs.running(func(j Job) bool { return j.Kind == JobSetDeleteOnTermination && j.ENIID == eniID }) {
		return
	}
	n.job(Job{Kind: JobSetDeleteOnTermination, ENIID: eniID, AttachmentID: attachmentID})
}

func (n *Node) onDOT(ev DOTResult, now time.Time) {
	j, _ := n.jobs.done(ev.JobID)
	if ev.Err == nil {
		delete(n.cloud.dotTries, j.ENIID)
		if m, ok := n.meta[j.ENIID]; ok {
			m.DOT = true
			n.meta[j.ENIID] = m
		}
		return
	}
	n.noteEC2(ev.Err)
	n.cloud.dotTries[j.ENIID]++
	wait := min(time.Duration(1<<min(n.cloud.dotTries[j.ENIID], 5))*time.Second, maxDOTRetry)
	n.log.Warn("DeleteOnTermination not set yet; trying again", "eni", j.ENIID, "in", wait.String(), "err", ev.Err)
	n.jobs.schedule(now.Add(wait), j)
}

// dropVanished removes the free blocks and ENIs that EC2 no longer shows
// attached. What a pod still holds is kept and reported.
func (n *Node) dropVanished(attached map[string]ENIInfo, now time.Time) {
	for _, es := range n.pool.Stats(now).ENIs {
		e, ok := attached[es.ID]
		if !ok {
			if err := n.pool.RemoveENI(es.ID, now); err != nil {
				n.log.Error("ENI no longer attached in EC2 but pods hold its addresses", "eni", es.ID, "err", err)
				continue
			}
			delete(n.meta, es.ID)
			n.log.Warn("ENI no longer attached in EC2: dropped from the pool", "eni", es.ID)
			continue
		}
		for _, b := range es.Blocks {
			if slices.Contains(e.Blocks, b.Prefix) {
				continue
			}
			if err := n.pool.RemoveBlock(b.Prefix, now); err != nil {
				n.log.Error("address block no longer on its ENI in EC2 but pods hold it", "eni", es.ID, "block", b.Prefix.String(), "err", err)
				continue
			}
			n.log.Warn("address block no longer on its ENI in EC2: dropped from the pool", "eni", es.ID, "block", b.Prefix.String())
		}
	}
}

// detaching says whether a detach of eniID is under way.
func (n *Node) detaching(eniID string) (Job, bool) {
	for _, j := range n.jobs.inFlight {
		if j.Kind == JobAction && j.Action.Kind == ipam.DetachENI && j.Action.ENIID == eniID {
			return j, true
		}
	}
	return Job{}, false
}

func (n *Node) onAction(ev ActionResult, now time.Time) {
	j, ok := n.jobs.done(ev.JobID)
	if !ok {
		panic(fmt.Sprintf("nodestate: result for unknown job %d", ev.JobID))
	}
	act := j.Action
	if ev.Err != nil {
		n.log.Error("EC2 change failed", "action", act.String(), "err", ev.Err)
	}
	n.noteEC2(ev.Err)
	switch act.Kind {
	case ipam.ReleaseBlocks:
		n.releaseDone(act, ev, now)
		n.shrunk(ev, now)
	case ipam.AssignBlocks:
		n.grown(ev.Err, now)
		n.frag.observe(n, act, ev, n.classify(ev.Err), now)
		for _, b := range ev.Blocks {
			if err := n.pool.AddBlock(act.ENIID, b); err != nil {
				n.log.Error("assigned block not taken into the pool", "block", b.String(), "err", err)
				continue
			}
			n.quarantineRoutedIn(b, now)
		}
	case ipam.AttachENI:
		n.grown(ev.Err, now)
		n.frag.observe(n, act, ev, n.classify(ev.Err), now)
		if ev.Err != nil {
			// EC2 may have attached it anyway (a timeout, a 5xx after the
			// fact): read EC2 soon so such an ENI is adopted, and until
			// then count its device index as taken, or the next attach
			// aims at the same index and fails for it.
			n.cloud.resyncSoonFromEC2(now)
			n.cloud.devices[j.Device] = true
			if ev.Leftover != "" {
				n.deleteLeftover(ev.Leftover, now)
			}
			return
		}
		at := &attaching{device: j.Device, action: act, since: now, poll: firstAttachPoll, mac: ev.MAC, askEC2: now.Add(n.burst.expectedAttach())}
		n.cloud.attaching[ev.ENIID] = at
		n.log.Debug("ENI attach answered; EC2 is asked when it should be done", "eni", ev.ENIID, "in", n.burst.expectedAttach().String())
		n.jobs.schedule(now.Add(at.firstPoll()), Job{Kind: JobConfirmAttach, ENIID: ev.ENIID, AttachmentID: ev.AttachmentID, Device: j.Device, MAC: at.mac})
		if !ev.DeleteOnTermination {
			n.jobs.schedule(now.Add(time.Second), Job{Kind: JobSetDeleteOnTermination, ENIID: ev.ENIID, AttachmentID: ev.AttachmentID})
		}
	case ipam.DetachENI:
		n.shrunk(ev, now)
		if ev.Err != nil || ev.Skipped {
			// Still attached: the next read of EC2 takes it back.
			n.cloud.resyncSoonFromEC2(now)
			if len(ev.Routed) > 0 {
				n.startHostCheck()
			}
			return
		}
		n.cloud.delTries[act.ENIID] = 0
		n.jobs.schedule(now.Add(time.Second), Job{Kind: JobDeleteENI, ENIID: act.ENIID})
	}
}

// releaseDone puts back into the pool the blocks a release did not give
// back to EC2.
func (n *Node) releaseDone(act ipam.Action, ev ActionResult, now time.Time) {
	inDoubt := false
	for _, b := range act.Blocks {
		// A failed call may have been done all the same (EC2 answered
		// 5xx after acting, or the answer was lost): until EC2 is read
		// again the block may be gone, and a pod given an address on it
		// would have none. It stays out of the pool; a read started from
		// now on brings it back if EC2 still shows it.
		if slices.Contains(ev.Blocks, b) || ev.Err != nil {
			n.cloud.released[b] = n.jobs.nextID + 1
			inDoubt = inDoubt || ev.Err != nil
			continue
		}
		delete(n.cloud.released, b)
		if err := n.pool.AddBlock(act.ENIID, b); err != nil {
			n.log.Error("could not return a block to the pool after a declined release", "block", b.String(), "err", err)
			continue
		}
		n.quarantineRoutedIn(b, now)
	}
	if inDoubt {
		n.cloud.resyncSoonFromEC2(now)
	}
	if len(ev.Routed) > 0 {
		n.observeRoutes(ev.Routed, now, false)
	}
}

// grown records the outcome of a growth action: after a refusal, growth
// waits (the account's API budget is shared), and the refusal explains an
// empty pool to pods.
func (n *Node) grown(err error, now time.Time) {
	n.cloud.lastGrowErr = err
	if err == nil {
		n.cloud.grow.reset()
		return
	}
	// Every failure waits, not only refusals: EC2's own retries are
	// spent already, and asking again at the next event would loop.
	c := n.classify(err)
	if c.SubnetExhausted {
		n.pressure.noteExhausted(n.cloud.plan.SubnetID, now)
	}
	wait := n.cloud.grow.refused(now)
	if !c.SubnetFragmented { // the prefix fallback grows at once and says so
		n.log.Warn("EC2 did not grow the pool; asking again later", "in", wait.String(), "err", err)
	}
	n.growthNotice(c, err)
}

// shrunk spaces out the next release or detach after one that failed or
// was declined, and resets the wait after one that went through.
func (n *Node) shrunk(ev ActionResult, now time.Time) {
	if ev.Err != nil || ev.Skipped {
		n.cloud.shrink.refused(now)
		return
	}
	n.cloud.shrink.reset()
}

func (n *Node) onAttach(ev AttachResult, now time.Time) {
	j, _ := n.jobs.done(ev.JobID)
	at, ok := n.cloud.attaching[j.ENIID]
	if !ok {
		return // adopted by a resync meanwhile
	}
	if ev.Err == nil && !ev.NotYet {
		n.log.Debug("attachment confirmed in EC2", "eni", j.ENIID, "after", now.Sub(at.since).String(), "followUps", at.followUps)
		if err := n.adopt(ev.ENI, now); err != nil {
			n.log.Error("attached ENI not taken into the pool", "eni", j.ENIID, "err", err)
		}
		n.burst.attachTook = now.Sub(at.since)
		delete(n.cloud.attaching, j.ENIID)
		return
	}
	if ev.Err != nil {
		n.noteEC2(ev.Err)
	}
	if !ev.IMDSOnly {
		n.log.Debug("attachment not done yet in EC2", "eni", j.ENIID, "after", now.Sub(at.since).String(), "err", ev.Err)
	}
	if now.Sub(at.since) >= n.cfg.AttachTimeout {
		delete(n.cloud.attaching, j.ENIID)
		n.cloud.lastGrowErr = fmt.Errorf("ENI %s not attached after %s", j.ENIID, n.cfg.AttachTimeout)
		n.log.Error("ENI did not attach in time; a later read of EC2 adopts it if it does", "eni", j.ENIID, "waited", now.Sub(at.since).String())
		return
	}
	if ev.AskEC2 {
		// IMDS shows the interface (or cannot answer, and is not
		// watched any more): ask EC2 at once.
		if ev.IMDSFailed {
			at.mac = ""
		}
		j.MAC, at.askEC2 = "", time.Time{}
		n.job(j)
		return
	}
	if now.Sub(at.since) >= imdsAttachWatch {
		at.mac = ""
	}
	wait := imdsAttachPoll
	if !ev.IMDSOnly || at.mac == "" {
		// EC2 was asked, or will be: back off.
		at.poll = min(2*at.poll, maxAttachPoll)
		wait = at.poll
	}
	if ev.Err == nil && !ev.IMDSOnly && at.mac != "" && at.askEC2.IsZero() && at.followUps < ec2FollowUps {
		// The ask at the expected time was early: ask again shortly.
		// Not after an error: a refused call is not repeated sooner.
		at.followUps++
		j.MAC = ""
		n.jobs.schedule(now.Add(ec2FollowUp), j)
		return
	}
	j.MAC = at.mac
	if at.mac != "" && !at.askEC2.IsZero() && !now.Add(wait).Before(at.askEC2) {
		// Ask EC2 when the attach should be done, not at the next IMDS
		// poll after it: on average half a poll sooner for a burst's pods.
		wait = max(at.askEC2.Sub(now), 0)
		j.MAC, at.askEC2 = "", time.Time{} // an empty MAC makes the executor ask EC2
	}
	n.jobs.schedule(now.Add(wait), j)
}

// firstPoll is how soon a new attachment is first looked at: IMDS at its
// steady pace when the MAC is known, else EC2.
func (at *attaching) firstPoll() time.Duration {
	if at.mac != "" {
		return imdsAttachPoll
	}
	return firstAttachPoll
}

func (n *Node) onDelete(ev DeleteResult, now time.Time) {
	j, _ := n.jobs.done(ev.JobID)
	if _, ok := n.cloud.leftovers[j.ENIID]; ok {
		n.leftoverDeleted(j, ev, now)
		return
	}
	if ev.Err == nil && !ev.NotYet {
		delete(n.cloud.delTries, j.ENIID)
		return
	}
	n.cloud.delTries[j.ENIID]++
	if n.cloud.delTries[j.ENIID] >= deleteTries {
		delete(n.cloud.delTries, j.ENIID)
		n.log.Warn("detached ENI not deleted; the leak collector deletes it later", "eni", j.ENIID, "err", ev.Err)
		return
	}
	n.jobs.schedule(now.Add(deleteRetry), j)
}

func (n *Node) onENIConfig(ev ENIConfigUpdate) {
	c := &n.cloud
	changed := c.eniCfgOK != ev.OK || c.eniCfgMsg != ev.Message
	c.eniCfgOK, c.eniCfgMsg = ev.OK, ev.Message
	if ev.OK {
		c.plan.SubnetID, c.plan.SecurityGroups = ev.SubnetID, slices.Clone(ev.SecurityGroups)
	}
	if changed && !ev.OK {
		n.log.Warn("custom networking: ENIConfig not usable; no ENI is attached or detached until it is, and the node is not ready", "problem", ev.Message)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// familyBlocks are the blocks of an ENI at device that pods of the
// machine's mode take addresses from: IPv4 /32s and /28s, or in IPv6
// mode the primary ENI's IPv6 /80s (aws-node's IPv6 mode uses the
// primary ENI only). The others stay on the ENI, untouched: an IPv4 pool
// must never hand out an IPv6 address, nor an IPv6 pool an IPv4 one.
func (n *Node) familyBlocks(device int, blocks []netip.Prefix) []netip.Prefix {
	keep := func(p netip.Prefix) bool { return p.Addr().Is6() == n.cfg.IPv6 && (!n.cfg.IPv6 || device == 0) }
	if !slices.ContainsFunc(blocks, func(p netip.Prefix) bool { return !keep(p) }) {
		return blocks
	}
	out := make([]netip.Prefix, 0, len(blocks))
	for _, p := range blocks {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}
