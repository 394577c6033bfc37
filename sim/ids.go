package sim

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// idGen makes EC2-shaped identifiers from a seeded generator, so a run
// with the same seed and the same calls names everything the same way.
type idGen struct {
	// mu guards rng: request IDs are drawn outside the cloud's lock.
	mu  sync.Mutex
	rng *rand.Rand
}

func newIDGen(seed int64) *idGen {
	return &idGen{rng: rand.New(rand.NewPCG(uint64(seed), 0x6964730a))} // "ids"
}

// resource returns prefix-<17 hex digits>, the shape of current EC2 IDs
// ("eni-0a1b2c3d4e5f60718").
func (g *idGen) resource(prefix string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("%s-0%016x", prefix, g.rng.Uint64())
}

// mac returns a locally administered unicast MAC, as EC2 gives ENIs.
func (g *idGen) mac() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.rng.Uint64()
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// requestID returns a UUID-shaped request ID.
func (g *idGen) requestID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, b := g.rng.Uint64(), g.rng.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", uint32(a>>32), uint16(a>>16), uint16(a)&0xfff, uint16(b>>48)&0x3fff|0x8000, b&0xffffffffffff)
}

// uint64 draws a number for a resource the emulator picks, such as an
// IPv6 block.
func (g *idGen) uint64() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rng.Uint64()
}
