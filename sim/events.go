package sim

import (
	"net/netip"
	"slices"
	"sync"
	"time"
)

// EventKind names a change a network fabric must mirror.
type EventKind string

const (
	// ENIAttaching: AttachNetworkInterface began an attachment; the
	// instance sees no device until ENIAttached. Addresses and Prefixes
	// hold everything on the ENI, so a fabric can lay the wire (the VPC's
	// routes to the ENI) during the attach delay and only plug it in when
	// it completes.
	ENIAttaching EventKind = "ENIAttaching"
	// ENIAttached: the ENI finished attaching; Addresses and Prefixes hold
	// everything on it at that moment.
	ENIAttached EventKind = "ENIAttached"
	// ENIDetached: the ENI finished detaching (or its instance was
	// terminated, also while it was still attaching); Addresses and
	// Prefixes hold what it carried.
	ENIDetached EventKind = "ENIDetached"
	// AddressesAssigned and AddressesUnassigned carry only the addresses
	// that changed.
	AddressesAssigned   EventKind = "AddressesAssigned"
	AddressesUnassigned EventKind = "AddressesUnassigned"
	// PrefixesAssigned and PrefixesUnassigned carry only the /28
	// prefixes that changed.
	PrefixesAssigned   EventKind = "PrefixesAssigned"
	PrefixesUnassigned EventKind = "PrefixesUnassigned"
	// IPv6AddressesAssigned and IPv6AddressesUnassigned carry only the
	// IPv6 addresses that changed, in IPv6Addresses.
	IPv6AddressesAssigned   EventKind = "IPv6AddressesAssigned"
	IPv6AddressesUnassigned EventKind = "IPv6AddressesUnassigned"
	// IPv6PrefixesAssigned and IPv6PrefixesUnassigned carry only the /80
	// prefixes that changed, in IPv6Prefixes.
	IPv6PrefixesAssigned   EventKind = "IPv6PrefixesAssigned"
	IPv6PrefixesUnassigned EventKind = "IPv6PrefixesUnassigned"
)

// Event is one change to the addresses an instance can send from. Events
// about an ENI attached to nothing have an empty InstanceID and a
// DeviceIndex of -1; a fabric can ignore them, since ENIAttached later
// carries the ENI's full state.
type Event struct {
	Kind               EventKind
	Time               time.Time
	InstanceID         string
	NetworkInterfaceID string
	MAC                string
	DeviceIndex        int
	NetworkCardIndex   int
	SubnetID           string
	SubnetCIDR         netip.Prefix
	Addresses          []netip.Addr
	Prefixes           []netip.Prefix
	// SubnetIPv6CIDR is the subnet's IPv6 /64, invalid for an IPv4-only
	// subnet. IPv6Addresses and IPv6Prefixes are kept apart from
	// Addresses and Prefixes so that a fabric that routes only IPv4 is
	// never handed an IPv6 address.
	SubnetIPv6CIDR netip.Prefix
	IPv6Addresses  []netip.Addr
	IPv6Prefixes   []netip.Prefix
	// Initial marks the ENIAttached events Subscribe replays for ENIs
	// already in use when the subscription starts.
	Initial bool
}

// eventFor describes e as it is now, with every address it holds.
func eventFor(kind EventKind, e *eni, at time.Time) Event {
	ev := Event{
		Kind:               kind,
		Time:               at,
		NetworkInterfaceID: e.id,
		MAC:                e.mac,
		DeviceIndex:        -1,
		SubnetID:           e.subnet.id,
		SubnetCIDR:         e.subnet.cidr,
		Addresses:          e.addresses(),
		Prefixes:           slices.Clone(e.prefixes),
		IPv6Addresses:      slices.Clone(e.ipv6s),
		IPv6Prefixes:       slices.Clone(e.ipv6Prefixes),
	}
	if e.subnet.ipv6 != nil {
		ev.SubnetIPv6CIDR = e.subnet.ipv6.cidr
	}
	if e.att != nil {
		ev.InstanceID = e.att.instance.id
		ev.DeviceIndex = e.att.deviceIndex
		ev.NetworkCardIndex = e.att.cardIndex
	}
	return ev
}

// Subscribe returns a channel of every change from now on, in the order
// the cloud made them, starting with an ENIAttached event (Initial set)
// for each ENI already in use, so a subscriber never has to ask for the
// state separately. Delivery never blocks the cloud: events queue until
// read. cancel ends the subscription and closes the channel; Close ends
// every subscription.
func (c *Cloud) Subscribe() (events <-chan Event, cancel func()) {
	s := newSubscriber()
	c.read(func(now time.Time) error {
		for _, in := range c.instanceOrder {
			for _, e := range c.attachedENIsLocked(in) {
				if e.status == statusInUse || e.status == statusDetaching {
					ev := eventFor(ENIAttached, e, now)
					ev.Initial = true
					s.push(ev)
				}
			}
		}
		if c.closed {
			s.stop() // the channel closes at once
		} else {
			c.events.add(s)
		}
		return nil
	})
	go s.run()
	return s.out, func() { c.events.remove(s) }
}

// emitLocked queues ev for every subscriber; called with c.mu held so
// that events keep the order of the changes.
func (c *Cloud) emitLocked(ev Event) {
	c.events.publish(ev)
}

type broker struct {
	// mu guards subs.
	mu   sync.Mutex
	subs map[*subscriber]bool
}

func newBroker() *broker { return &broker{subs: map[*subscriber]bool{}} }

func (b *broker) add(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs[s] = true
}

func (b *broker) remove(s *subscriber) {
	b.mu.Lock()
	delete(b.subs, s)
	b.mu.Unlock()
	s.stop()
}

func (b *broker) publish(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.push(ev)
	}
}

func (b *broker) closeAll() {
	b.mu.Lock()
	subs := b.subs
	b.subs = map[*subscriber]bool{}
	b.mu.Unlock()
	for s := range subs {
		s.stop()
	}
}

// subscriber is an unbounded queue drained into out by one goroutine.
type subscriber struct {
	// mu guards queue.
	mu    sync.Mutex
	queue []Event
	wake  chan struct{}
	done  chan struct{}
	once  sync.Once
	out   chan Event
}

func newSubscriber() *subscriber {
	return &subscriber{wake: make(chan struct{}, 1), done: make(chan struct{}), out: make(chan Event)}
}

func (s *subscriber) push(ev Event) {
	s.mu.Lock()
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) stop() { s.once.Do(func() { close(s.done) }) }

func (s *subscriber) run() {
	defer close(s.out)
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, ev := range batch {
			select {
			case s.out <- ev:
			case <-s.done:
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
	}
}
