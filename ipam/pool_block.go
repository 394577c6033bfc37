package ipam

import (
	"math/bits"
	"net/netip"
	"time"
)

// Block sizes EC2 hands to an ENI: a secondary private IPv4 address, or a
// delegated /28 prefix when prefix delegation is on, or in IPv6 mode a
// delegated IPv6 /80 prefix.
const (
	secondaryBits = 32
	// PrefixBits is a delegated IPv4 prefix's length, PrefixAddrs the
	// addresses it holds: the one place the planner, the pool and the
	// agent's machine learn that a /28 is 16 addresses.
	PrefixBits  = 28
	PrefixAddrs = 1 << (32 - PrefixBits)
	prefix6Bits = 80
	// wideSize is how many addresses a /80 holds. The pool counts in
	// int, which must then be 64 bits: the constant below does not
	// compile where it is not.
	wideSize int = 1 << (128 - prefix6Bits)
)

// block is one secondary /32 or delegated /28. Each address is in exactly
// one of three states, kept as bitmaps so the lowest free address and the
// counts are single instructions: free (bit set in free), cooling (bit set
// in cooling) or assigned (neither).
type block struct {
	prefix  netip.Prefix
	eni     *eniEntry
	base    uint32 // first address, as an integer
	free    uint32
	cooling uint32
	slots   []slot
	heapIdx int // position in eni.withFree, -1 when full
	// wide is set for an IPv6 /80, whose 2^48 addresses are too many
	// for bitmaps and slots: base, free, cooling and slots are then
	// unused, and only the addresses in use have an entry.
	wide *wideSlots
}

// wideSlots is a /80's bookkeeping: an address is free unless it has an
// entry in used; cooling marks the used ones that cool down.
type wideSlots struct {
	used    map[int]slot
	cooling map[int]bool
}

// slot is what the pool knows about one address beyond its state.
type slot struct {
	key        Key
	pod        Pod
	assignedAt time.Time
	until      time.Time // end of cooldown; meaningful while cooling
}

func newBlock(prefix netip.Prefix, e *eniEntry) *block {
	if prefix.Addr().Is6() {
		return &block{prefix: prefix, eni: e, heapIdx: -1,
			wide: &wideSlots{used: make(map[int]slot), cooling: make(map[int]bool)}}
	}
	a := prefix.Addr().As4()
	n := 1 << (32 - prefix.Bits())
	return &block{
		prefix:  prefix,
		eni:     e,
		base:    uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]),
		free:    uint32(1)<<n - 1,
		slots:   make([]slot, n),
		heapIdx: -1,
	}
}

func (b *block) size() int {
	if b.wide != nil {
		return wideSize
	}
	return len(b.slots)
}

func (b *block) nFree() int {
	if b.wide != nil {
		return wideSize - len(b.wide.used)
	}
	return bits.OnesCount32(b.free)
}

func (b *block) nCooling() int {
	if b.wide != nil {
		return len(b.wide.cooling)
	}
	return bits.OnesCount32(b.cooling)
}

func (b *block) nAssigned() int {
	return b.size() - b.nFree() - b.nCooling()
}

func (b *block) addr(i int) netip.Addr {
	if b.wide != nil {
		a := b.prefix.Addr().As16()
		for k, v := 15, uint64(i); k >= prefix6Bits/8; k, v = k-1, v>>8 {
			a[k] = byte(v)
		}
		return netip.AddrFrom16(a)
	}
	v := b.base + uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// offset returns addr's position in b; addr must lie inside b.prefix.
func (b *block) offset(addr netip.Addr) int {
	if b.wide != nil {
		a := addr.As16()
		var v int
		for _, x := range a[prefix6Bits/8:] {
			v = v<<8 | int(x)
		}
		return v
	}
	a := addr.As4()
	return int(uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) - b.base)
}

func (b *block) isFree(i int) bool {
	if b.wide != nil {
		_, used := b.wide.used[i]
		return !used
	}
	return b.free&(1<<i) != 0
}

func (b *block) isCooling(i int) bool {
	if b.wide != nil {
		return b.wide.cooling[i]
	}
	return b.cooling&(1<<i) != 0
}

func (b *block) isAssigned(i int) bool {
	return !b.isFree(i) && !b.isCooling(i)
}

// slotAt is what the pool knows about address i; the zero slot for a
// free address of a /80.
func (b *block) slotAt(i int) slot {
	if b.wide != nil {
		return b.wide.used[i]
	}
	return b.slots[i]
}

// setSlot records what the pool knows about address i, which must not
// be free (a /80 keeps entries for used addresses only).
func (b *block) setSlot(i int, s slot) {
	if b.wide != nil {
		b.wide.used[i] = s
		return
	}
	b.slots[i] = s
}

// lowestFree is the lowest free address's offset, as aws-node picks
// from its IPv6 prefix too (the /80's first address included: EC2
// never delegates the /64's first /80, whose first address is the
// subnet router's). Only called with a free address in b.
func (b *block) lowestFree() int {
	if b.wide != nil {
		for i := 0; ; i++ {
			if _, used := b.wide.used[i]; !used {
				return i
			}
		}
	}
	return lowestBit(b.free)
}

// markTaken, markCooling and markFree move address i between the
// states; the pool's take, startCooling and release keep the counters.
func (b *block) markTaken(i int) {
	if b.wide != nil {
		b.wide.used[i] = slot{}
		return
	}
	b.free &^= 1 << i
}

func (b *block) markCooling(i int) {
	if b.wide != nil {
		b.wide.cooling[i] = true
		return
	}
	b.cooling |= 1 << i
}

func (b *block) markFree(i int) {
	if b.wide != nil {
		delete(b.wide.used, i)
		delete(b.wide.cooling, i)
		return
	}
	b.cooling &^= 1 << i
	b.slots[i] = slot{}
	b.free |= 1 << i
}

func (b *block) assignment(i int) Assignment {
	s := b.slotAt(i)
	return Assignment{
		Key:        s.key,
		Pod:        s.pod,
		Addr:       b.addr(i),
		ENIID:      b.eni.ID,
		Block:      b.prefix,
		AssignedAt: s.assignedAt,
	}
}

// lastCooling returns when the last of b's cooling addresses comes free.
func (b *block) lastCooling() time.Time {
	var t time.Time
	if b.wide != nil {
		for i := range b.wide.cooling {
			if u := b.wide.used[i].until; u.After(t) {
				t = u
			}
		}
		return t
	}
	for i := range b.slots {
		if b.isCooling(i) && b.slots[i].until.After(t) {
			t = b.slots[i].until
		}
	}
	return t
}

func (b *block) state() BlockState {
	return BlockState{Prefix: b.prefix, Assigned: b.nAssigned(), Cooling: b.nCooling(), Free: b.nFree()}
}

// packOrder is the order in which an ENI's blocks give out addresses: the
// fullest block first, so partly used blocks fill before empty ones are
// touched and empty ones stay releasable; the lowest address breaks ties
// so placement is deterministic.
func packOrder(x, y *block) bool {
	fx, fy := x.nFree(), y.nFree()
	if fx != fy {
		return fx < fy
	}
	return x.prefix.Addr().Less(y.prefix.Addr())
}
