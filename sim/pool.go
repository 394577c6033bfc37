package sim

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
)

// prefixLen is the size of the IPv4 prefixes EC2 delegates to ENIs.
const prefixLen = 28

// pool tracks which addresses of one subnet are taken. EC2 reserves five
// addresses of every subnet: the network address, +1 (VPC router), +2
// (DNS), +3 (future use) and the broadcast address; they are never handed
// out and a /28 prefix may not cover them.
type pool struct {
	cidr netip.Prefix
	base uint32
	used []bool // by offset from base; reserved addresses are marked used
	free int
	rng  *rand.Rand // nil: lowest free address first
}

func newPool(cidr netip.Prefix, rng *rand.Rand) *pool {
	size := 1 << (32 - cidr.Bits())
	p := &pool{cidr: cidr, base: toU32(cidr.Addr()), used: make([]bool, size), free: size, rng: rng}
	for _, off := range []int{0, 1, 2, 3, size - 1} {
		p.used[off] = true
		p.free--
	}
	return p
}

func toU32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func fromU32(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func (p *pool) addr(off int) netip.Addr { return fromU32(p.base + uint32(off)) }

func (p *pool) offset(a netip.Addr) int { return int(toU32(a) - p.base) }

// reserved reports whether a is one of the five addresses EC2 keeps.
func (p *pool) reserved(a netip.Addr) bool {
	off := p.offset(a)
	return p.cidr.Contains(a) && (off <= 3 || off == len(p.used)-1)
}

// isFree reports whether a is in the subnet and nobody holds it.
func (p *pool) isFree(a netip.Addr) bool {
	return a.Is4() && p.cidr.Contains(a) && !p.used[p.offset(a)]
}

// take marks a taken; the caller has checked isFree.
func (p *pool) take(a netip.Addr) {
	p.used[p.offset(a)] = true
	p.free--
}

func (p *pool) release(a netip.Addr) {
	if !p.cidr.Contains(a) || p.reserved(a) || !p.used[p.offset(a)] {
		panic("sim: releasing an address the pool does not hold: " + a.String())
	}
	p.used[p.offset(a)] = false
	p.free++
}

// takeAny takes n free addresses, all or none.
func (p *pool) takeAny(n int) ([]netip.Addr, bool) {
	if n > p.free {
		return nil, false
	}
	out := make([]netip.Addr, 0, n)
	for range n {
		skip := 0
		if p.rng != nil {
			skip = p.rng.IntN(p.free)
		}
		for off, u := range p.used {
			if u {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			a := p.addr(off)
			p.take(a)
			out = append(out, a)
			break
		}
	}
	return out, true
}

// prefixFree reports whether the aligned /28 q lies in the subnet with
// every address free.
func (p *pool) prefixFree(q netip.Prefix) bool {
	if q.Bits() != prefixLen || q.Masked() != q || !p.cidr.Contains(q.Addr()) || p.cidr.Bits() > prefixLen {
		return false
	}
	start := p.offset(q.Addr())
	for off := start; off < start+16; off++ {
		if p.used[off] {
			return false
		}
	}
	return true
}

func (p *pool) takePrefix(q netip.Prefix) {
	start := p.offset(q.Addr())
	for off := start; off < start+16; off++ {
		p.take(p.addr(off))
	}
}

func (p *pool) releasePrefix(q netip.Prefix) {
	start := p.offset(q.Addr())
	for off := start; off < start+16; off++ {
		p.release(p.addr(off))
	}
}

// takeAnyPrefixes takes n free aligned /28 blocks, all or none. It fails
// when the free space is fragmented even if enough single addresses are
// free: EC2's InsufficientCidrBlocks.
func (p *pool) takeAnyPrefixes(n int) ([]netip.Prefix, bool) {
	var blocks []netip.Prefix
	for off := 0; off+16 <= len(p.used); off += 16 {
		q := netip.PrefixFrom(p.addr(off), prefixLen)
		if p.prefixFree(q) {
			blocks = append(blocks, q)
		}
	}
	if len(blocks) < n {
		return nil, false
	}
	if p.rng != nil {
		p.rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	}
	blocks = blocks[:n]
	for _, q := range blocks {
		p.takePrefix(q)
	}
	return blocks, true
}

// freePrefixes counts the aligned /28 blocks with every address free.
func (p *pool) freePrefixes() int {
	n := 0
	for off := 0; off+16 <= len(p.used); off += 16 {
		if p.prefixFree(netip.PrefixFrom(p.addr(off), prefixLen)) {
			n++
		}
	}
	return n
}
