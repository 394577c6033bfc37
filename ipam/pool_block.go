package ipam

import (
	"math/bits"
	"net/netip"
	"time"
)

// Block sizes EC2 hands to an ENI: a secondary private IPv4 address, or a
// delegated /28 prefix when prefix delegation is on.
const (
	secondaryBits = 32
	prefixBits    = 28
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
}

// slot is what the pool knows about one address beyond its state.
type slot struct {
	key        Key
	pod        Pod
	assignedAt time.Time
	until      time.Time // end of cooldown; meaningful while cooling
}

func newBlock(prefix netip.Prefix, e *eniEntry) *block {
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

func (b *block) size() int     { return len(b.slots) }
func (b *block) nFree() int    { return bits.OnesCount32(b.free) }
func (b *block) nCooling() int { return bits.OnesCount32(b.cooling) }
func (b *block) nAssigned() int {
	return b.size() - b.nFree() - b.nCooling()
}

func (b *block) addr(i int) netip.Addr {
	v := b.base + uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// offset returns addr's position in b; addr must lie inside b.prefix.
func (b *block) offset(addr netip.Addr) int {
	a := addr.As4()
	return int(uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) - b.base)
}

func (b *block) isFree(i int) bool    { return b.free&(1<<i) != 0 }
func (b *block) isCooling(i int) bool { return b.cooling&(1<<i) != 0 }
func (b *block) isAssigned(i int) bool {
	return !b.isFree(i) && !b.isCooling(i)
}

func (b *block) assignment(i int) Assignment {
	s := &b.slots[i]
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
	return x.base < y.base
}
