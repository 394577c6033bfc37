package sim

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
)

// ipv6PrefixLen is the size of the IPv6 prefixes EC2 delegates to ENIs:
// a /80 out of the subnet's /64, 65536 of them per subnet.
const ipv6PrefixLen = 80

// pool6 tracks which IPv6 addresses and /80 prefixes of one subnet's /64
// are taken. A /64 is far too large for pool's bitmap, so taken addresses
// and prefixes are kept in maps. As for IPv4, EC2 keeps the first four
// addresses and the last one of the block; no /80 may cover them, so the
// first and the last /80 are never delegated.
type pool6 struct {
	cidr     netip.Prefix // a /64
	addrs    map[netip.Addr]bool
	perBlock map[netip.Prefix]int // taken addresses by the /80 they fall in
	prefixes map[netip.Prefix]bool
	rng      *rand.Rand // nil: lowest free first
}

func newPool6(cidr netip.Prefix, rng *rand.Rand) *pool6 {
	return &pool6{cidr: cidr, addrs: map[netip.Addr]bool{}, perBlock: map[netip.Prefix]int{}, prefixes: map[netip.Prefix]bool{}, rng: rng}
}

// hostOffset is a's position in the /64 (its low 64 bits).
func hostOffset(a netip.Addr) uint64 {
	b := a.As16()
	return binary.BigEndian.Uint64(b[8:])
}

func (p *pool6) addrAt(off uint64) netip.Addr {
	b := p.cidr.Addr().As16()
	binary.BigEndian.PutUint64(b[8:], off)
	return netip.AddrFrom16(b)
}

// blockAt is the i-th /80 of the /64.
func (p *pool6) blockAt(i uint16) netip.Prefix {
	return netip.PrefixFrom(p.addrAt(uint64(i)<<48), ipv6PrefixLen)
}

func block80(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, ipv6PrefixLen).Masked() }

// reserved reports whether a is one of the five addresses EC2 keeps.
func (p *pool6) reserved(a netip.Addr) bool {
	off := hostOffset(a)
	return p.cidr.Contains(a) && (off <= 3 || off == ^uint64(0))
}

// isFree reports whether a is in the subnet, not reserved, and held by
// nobody, neither as an address nor inside a delegated /80.
func (p *pool6) isFree(a netip.Addr) bool {
	return a.Is6() && !a.Is4In6() && p.cidr.Contains(a) && !p.reserved(a) && !p.addrs[a] && !p.prefixes[block80(a)]
}

// take marks a taken; the caller has checked isFree.
func (p *pool6) take(a netip.Addr) {
	p.addrs[a] = true
	p.perBlock[block80(a)]++
}

func (p *pool6) release(a netip.Addr) {
	if !p.addrs[a] {
		panic("sim: releasing an IPv6 address the pool does not hold: " + a.String())
	}
	delete(p.addrs, a)
	if q := block80(a); p.perBlock[q] > 1 {
		p.perBlock[q]--
	} else {
		delete(p.perBlock, q)
	}
}

// takeAny takes n free addresses: the lowest first (from the first /80,
// which is never delegated), or, in random order, scattered over the /64
// as EC2 scatters them.
func (p *pool6) takeAny(n int) []netip.Addr {
	out := make([]netip.Addr, 0, n)
	var off uint64 = 4
	for len(out) < n {
		var a netip.Addr
		if p.rng != nil {
			a = p.addrAt(p.rng.Uint64())
		} else {
			a = p.addrAt(off)
			off++
			if p.prefixes[block80(a)] {
				off = (off>>48 + 1) << 48 // skip the delegated /80
				continue
			}
		}
		if p.isFree(a) {
			p.take(a)
			out = append(out, a)
		}
	}
	return out
}

// prefixFree reports whether q is an aligned /80 of the subnet that
// covers no reserved or taken address and is not delegated already.
func (p *pool6) prefixFree(q netip.Prefix) bool {
	if q.Bits() != ipv6PrefixLen || q.Masked() != q || !p.cidr.Contains(q.Addr()) {
		return false
	}
	return !coversReserved(q) && !p.prefixes[q] && p.perBlock[q] == 0
}

// coversReserved reports whether the /80 q is the first or the last of
// its /64, which hold the addresses EC2 reserves.
func coversReserved(q netip.Prefix) bool {
	i := uint16(hostOffset(q.Addr()) >> 48)
	return i == 0 || i == 0xffff
}

func (p *pool6) takePrefix(q netip.Prefix) { p.prefixes[q] = true }

func (p *pool6) releasePrefix(q netip.Prefix) {
	if !p.prefixes[q] {
		panic("sim: releasing an IPv6 prefix the pool does not hold: " + q.String())
	}
	delete(p.prefixes, q)
}

// takeAnyPrefixes takes n free /80s, all or none: the lowest first after
// the first /80 (where single addresses come from), or at random.
func (p *pool6) takeAnyPrefixes(n int) ([]netip.Prefix, bool) {
	var free []netip.Prefix
	for i := 1; i < 0xffff && len(free) < n; i++ {
		j := uint16(i)
		if p.rng != nil {
			j = uint16(1 + p.rng.IntN(0xfffe))
		}
		if q := p.blockAt(j); p.prefixFree(q) {
			p.takePrefix(q) // so a random draw cannot pick it twice
			free = append(free, q)
		}
	}
	if len(free) < n {
		for _, q := range free {
			p.releasePrefix(q)
		}
		return nil, false
	}
	return free, true
}
