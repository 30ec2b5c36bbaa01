package policy

import "math/rand/v2"

// RNG is a seeded generator (PCG) that advances with every draw. It is a
// plain value: assigning it clones the state, so a branch that copies its
// parent's RNG replays the parent's future draws until the two diverge, and
// Split derives an independent stream instead.
type RNG struct {
	pcg          rand.PCG
	seed, stream uint64
}

// NewRNG returns a generator for (seed, stream). Equal arguments give equal
// sequences.
func NewRNG(seed, stream uint64) RNG {
	return RNG{pcg: *rand.NewPCG(seed, stream), seed: seed, stream: stream}
}

// Uint64 returns the next 64 random bits.
func (r *RNG) Uint64() uint64 { return r.pcg.Uint64() }

// Float64 returns a uniform value in [0, 1) with 53 random bits.
func (r *RNG) Float64() float64 {
	return float64(r.pcg.Uint64()>>11) * 0x1p-53
}

// Split returns a new generator for stream, seeded from r's next output (so
// r advances by one draw). Different streams give independent sequences;
// the same (state, stream) gives the same one.
func (r *RNG) Split(stream uint64) RNG {
	return NewRNG(r.Uint64(), stream)
}

// Reset rewinds the generator to the start of its sequence.
func (r *RNG) Reset() { r.pcg.Seed(r.seed, r.stream) }
