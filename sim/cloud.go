package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// Options tune a Cloud. The zero value is usable: real clock, seed from
// the topology, logs discarded.
type Options struct {
	// Now is the cloud's clock. Nil means time.Now. With a fake clock,
	// delayed transitions (attach, detach) complete when an API call, an
	// IMDS read or Tick observes that their time has come; set AfterFunc
	// too if subscribers must hear of them without such a call.
	Now func() time.Time
	// AfterFunc schedules f after d on the same clock as Now, and returns
	// a function that cancels it. Nil means time.AfterFunc when Now is
	// nil, and no timers at all when Now is set. ManualClock.AfterFunc
	// fits.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Sleep waits out a fault's latency. Nil means a real timer that
	// gives up when ctx ends.
	Sleep func(ctx context.Context, d time.Duration) error
	// Seed drives every random choice (IDs, MACs, fault draws, random
	// address order). Zero means the topology's seed.
	Seed int64
	// Logger receives one debug line per API request. Nil discards.
	Logger *slog.Logger
}

// Cloud is an in-memory EC2 region with one VPC. It is safe for concurrent
// use; EC2Handler and IMDSHandler expose it over HTTP.
type Cloud struct {
	now       func() time.Time
	afterFunc func(time.Duration, func()) func() bool
	sleep     func(context.Context, time.Duration) error
	log       *slog.Logger

	region      string
	accountID   string
	vpcID       string
	vpcCIDRs    []netip.Prefix
	customTypes []InstanceTypeSpec
	attachDelay time.Duration
	detachDelay time.Duration
	imdsLag     time.Duration

	// throttleMu guards throttle, which SetThrottle replaces.
	throttleMu sync.Mutex
	throttle   *throttle
	faults     *faults
	// roles are the instances' IAM roles, fixed at start.
	roles  map[string]role
	events *broker
	tokens *imdsTokens
	tally  tally

	// mu guards everything below: the model of the region.
	mu     sync.Mutex
	ids    *idGen
	seq    int // creation order of ENIs, for stable listings and paging
	groups []string
	// vpcIPv6 are the VPC's IPv6 blocks: from the topology, and those
	// AssociateVpcCidrBlock adds.
	vpcIPv6       []vpcIPv6
	subnets       map[string]*subnet
	subnetOrder   []*subnet
	instances     map[string]*instance
	instanceOrder []*instance
	enis          map[string]*eni
	attachments   map[string]*eni // by attachment ID
	clientTokens  map[string]clientTokenRecord
	timerStop     func() bool
	timerDue      time.Time
	closed        bool
}

// NewCloud builds the region the topology describes: subnets, security
// groups, and every instance running with its primary ENI attached.
func NewCloud(t *Topology, opts Options) (*Cloud, error) {
	if t == nil {
		return nil, fmt.Errorf("new cloud: nil topology")
	}
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("new cloud: topology: %w", err)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = t.Seed
	}
	c := &Cloud{
		now:          opts.Now,
		afterFunc:    opts.AfterFunc,
		sleep:        opts.Sleep,
		log:          opts.Logger,
		region:       t.Region,
		accountID:    t.AccountID,
		vpcID:        t.VPC.ID,
		customTypes:  t.InstanceTypes,
		attachDelay:  time.Duration(t.AttachDelay),
		detachDelay:  time.Duration(t.DetachDelay),
		imdsLag:      time.Duration(t.IMDSLag),
		throttle:     newThrottle(t.Throttle),
		roles:        rolesByInstance(t),
		faults:       newFaults(seed, t.Faults),
		events:       newBroker(),
		tokens:       newIMDSTokens(),
		ids:          newIDGen(seed),
		groups:       t.SecurityGroups,
		subnets:      map[string]*subnet{},
		instances:    map[string]*instance{},
		enis:         map[string]*eni{},
		attachments:  map[string]*eni{},
		clientTokens: map[string]clientTokenRecord{},
	}
	if c.now == nil {
		c.now = time.Now
		if c.afterFunc == nil {
			c.afterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
		}
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.accountID == "" {
		c.accountID = "123456789012"
	}
	for _, s := range t.VPC.CIDRs {
		p, _ := parseIPv4Prefix(s) // validated
		c.vpcCIDRs = append(c.vpcCIDRs, p)
	}
	var poolRNG *rand.Rand
	if t.AddressOrder == "random" {
		poolRNG = rand.New(rand.NewPCG(uint64(seed), 0x706f6f6c)) // "pool"
	}
	if t.VPC.IPv6CIDR != "" {
		p, _ := parseIPv6Prefix(t.VPC.IPv6CIDR, 56) // validated
		c.vpcIPv6 = append(c.vpcIPv6, vpcIPv6{assocID: c.ids.resource("vpc-cidr-assoc"), cidr: p})
	}
	for _, s := range t.Subnets {
		p, _ := parseIPv4Prefix(s.CIDR) // validated
		sn := &subnet{id: s.ID, az: s.AZ, cidr: p, tags: cloneTags(s.Tags), pool: newPool(p, poolRNG),
			ipv6Native: s.IPv6Native, assignIPv6OnCreation: s.AssignIPv6AddressOnCreation || s.IPv6Native}
		if s.IPv6CIDR != "" {
			p6, _ := parseIPv6Prefix(s.IPv6CIDR, 64) // validated
			sn.ipv6 = &subnetIPv6{assocID: c.ids.resource("subnet-cidr-assoc"), cidr: p6, pool: newPool6(p6, poolRNG)}
		}
		c.subnets[s.ID] = sn
		c.subnetOrder = append(c.subnetOrder, sn)
	}
	now := c.now()
	for _, spec := range t.Instances {
		if err := c.launch(spec, now); err != nil {
			return nil, fmt.Errorf("new cloud: instance %s: %w", spec.ID, err)
		}
	}
	c.mu.Lock()
	c.recordIMDSLocked(now)
	c.mu.Unlock()
	return c, nil
}

// Close stops the cloud's timer and ends every subscription. The handlers
// keep answering; Close only stops background work.
func (c *Cloud) Close() {
	c.mu.Lock()
	c.closed = true
	if c.timerStop != nil {
		c.timerStop()
		c.timerStop = nil
	}
	c.mu.Unlock()
	c.events.closeAll()
}

// Tick completes every delayed transition whose time has come by the
// cloud's clock, publishing its events. Tests with a fake clock call it
// after moving the clock; API calls and IMDS reads do the same implicitly.
func (c *Cloud) Tick() {
	c.read(func(time.Time) error { return nil })
}

// update runs fn on the model under the lock, after completing due
// transitions, then records what IMDS will show and re-arms the timer.
func (c *Cloud) update(fn func(now time.Time) error) error {
	return c.apply(fn, true)
}

// read is update for fn that only reads the model: IMDS history is
// recorded only when a due transition changed the model. Rendering every
// instance's metadata after every Describe was most of the emulator's
// cost in the agent's simulation.
func (c *Cloud) read(fn func(now time.Time) error) error {
	return c.apply(fn, false)
}

func (c *Cloud) apply(fn func(now time.Time) error, mutates bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.settleLocked(now) {
		c.recordIMDSLocked(now) // so that fn, an IMDS read say, sees the present
	}
	err := fn(now)
	if mutates {
		c.recordIMDSLocked(now)
	}
	c.scheduleLocked(now)
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
