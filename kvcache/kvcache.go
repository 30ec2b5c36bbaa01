package kvcache

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// DefaultBlockSize is the number of token positions per block used when
// [Config.BlockSize] is zero.
const DefaultBlockSize = 16

// maxBlockFloats bounds the size of one block (1 GiB of float32) so that a
// nonsensical configuration fails in [New] instead of in an allocation.
const maxBlockFloats = 1 << 28

// ErrCacheFull is returned (possibly wrapped; test with [errors.Is]) by
// [Pool.Append] when a block is needed and the pool is at its cap with no
// free block. The sequence is left unchanged.
var ErrCacheFull = errors.New("kvcache: pool is full")

// ErrSeqFreed is returned by [Pool.Append] for a sequence that was freed.
var ErrSeqFreed = errors.New("kvcache: sequence was freed")

// ElemType is the element type the cache stores keys and values in.
type ElemType uint8

const (
	// F32 stores float32: keys and values exactly as the forward pass
	// computes them.
	F32 ElemType = iota
	// F16 stores IEEE binary16 (as llama.cpp does by default): half the
	// memory, and half the bytes attention reads, for a rounding of about
	// 2^-11 relative per element. Writes round to nearest even.
	F16
)

func (t ElemType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("ElemType(%d)", uint8(t))
}

// MarshalText writes the type's name (JSON: "f16").
func (t ElemType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a name ParseElemType accepts.
func (t *ElemType) UnmarshalText(b []byte) error {
	v, err := ParseElemType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseElemType reads a DType from its name, "f32" or "f16" (any case).
func ParseElemType(s string) (ElemType, error) {
	switch strings.ToLower(s) {
	case "f32":
		return F32, nil
	case "f16":
		return F16, nil
	}
	return 0, fmt.Errorf("kvcache: unknown KV cache type %q (want f32 or f16)", s)
}

// size is the bytes of one element.
func (t ElemType) size() int64 {
	if t == F16 {
		return 2
	}
	return 4
}

// Config describes the shape of the cached tensors (what a backend's
// storage holds per block, and what the pool counts its bytes by) and the
// memory cap.
type Config struct {
	Layers    int // transformer layers
	KVDim     int // kv heads * head dim: floats per position per layer for K, and as many for V
	BlockSize int // token positions per block; DefaultBlockSize when 0
	DType     ElemType

	// HeadDim is the size of one kv head; it must divide KVDim. When 0 it
	// is KVDim (the keys are then laid out as if there were one head). A
	// backend may store a block head by head (the CPU's does).
	HeadDim int

	// The pool holds at most MaxBlocks blocks. When MaxBlocks is 0 the cap is
	// derived from MaxBytes (rounded down to whole blocks); when both are set
	// the smaller cap wins. At least one of them must be positive.
	MaxBlocks int
	MaxBytes  int64
}

// Pool owns the blocks' ids and their reference counts, not their
// storage: a backend keeps the keys and values of block id i, and performs
// the copies on write the pool decides ([Pool.TakeCopies]). See the
// package documentation for the concurrency contract.
type Pool struct {
	layers, kvDim, blockSize int
	headDim, heads           int // heads = KVDim / HeadDim
	blockFloats              int // Layers*2*BlockSize*KVDim
	capBlocks                int
	dtype                    ElemType

	// A released block goes straight back on the free list with whatever
	// its last owner wrote: nothing reads a slot before it is written (see
	// Append), so no backend needs to clear storage.
	ref    []int32 // reference count by id; len(ref) blocks have been handed out
	free   []int32 // ids with ref == 0, reused LIFO
	copies []Copy  // copies on write decided and not yet taken

	shared  int // blocks with ref > 1
	logical int // sum of ref over all blocks = sum of live block-table lengths
	forks   uint64
	cows    uint64
	appends uint64
}

// Seq is one sequence of cached positions: a block table and a length. It is
// created by [Pool.NewSeq] or [Pool.Fork] and belongs to that pool.
type Seq struct {
	p     *Pool
	table []int32 // block ids; len == ceil(n / BlockSize)
	n     int
	freed bool
}

// Stats is a snapshot of the pool's memory use.
type Stats struct {
	BlocksInUse     int // blocks referenced by at least one live sequence
	SharedBlocks    int // blocks referenced by more than one live sequence
	FreeBlocks      int // blocks that can still be had: CapBlocks - BlocksInUse
	CapBlocks       int // the cap
	AllocatedBlocks int // blocks with storage (in use or on the free list)
	// LogicalBlocks is the sum of the block-table lengths of all live
	// sequences: the blocks they would need with one private copy each.
	LogicalBlocks int

	BytesInUse     int64 // BlocksInUse * BytesPerBlock
	BytesPerBlock  int64
	BytesAllocated int64 // AllocatedBlocks * BytesPerBlock
	LogicalBytes   int64 // LogicalBlocks * BytesPerBlock: the unshared footprint

	CopyOnWrites uint64 // copies on write Append decided because a block was shared
	Forks        uint64
	Appends      uint64 // successful Appends
}

// New returns an empty pool for cfg. No block storage is allocated up front.
func New(cfg Config) (*Pool, error) {
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.Layers <= 0 {
		return nil, fmt.Errorf("kvcache: Config.Layers = %d, want > 0", cfg.Layers)
	}
	if cfg.KVDim <= 0 {
		return nil, fmt.Errorf("kvcache: Config.KVDim = %d, want > 0", cfg.KVDim)
	}
	if cfg.HeadDim == 0 {
		cfg.HeadDim = cfg.KVDim
	}
	if cfg.HeadDim < 0 || cfg.KVDim%cfg.HeadDim != 0 {
		return nil, fmt.Errorf("kvcache: Config.HeadDim = %d does not divide KVDim = %d", cfg.HeadDim, cfg.KVDim)
	}
	if cfg.BlockSize < 0 {
		return nil, fmt.Errorf("kvcache: Config.BlockSize = %d, want >= 0", cfg.BlockSize)
	}
	if cfg.DType != F32 && cfg.DType != F16 {
		return nil, fmt.Errorf("kvcache: Config.DType = %v, want F32 or F16", cfg.DType)
	}
	if cfg.MaxBlocks < 0 || cfg.MaxBytes < 0 || (cfg.MaxBlocks == 0 && cfg.MaxBytes == 0) {
		return nil, fmt.Errorf("kvcache: Config.MaxBlocks = %d, MaxBytes = %d: want at least one > 0 and neither < 0",
			cfg.MaxBlocks, cfg.MaxBytes)
	}
	floats := int64(2 * cfg.BlockSize) // products checked step by step against overflow
	for _, f := range []int{cfg.Layers, cfg.KVDim} {
		if int64(f) > maxBlockFloats || floats*int64(f) > maxBlockFloats {
			return nil, fmt.Errorf("kvcache: block of Layers=%d * 2 * BlockSize=%d * KVDim=%d floats exceeds %d",
				cfg.Layers, cfg.BlockSize, cfg.KVDim, maxBlockFloats)
		}
		floats *= int64(f)
	}
	capBlocks := int64(math.MaxInt32) // block ids are int32
	if cfg.MaxBlocks > 0 {
		capBlocks = min(capBlocks, int64(cfg.MaxBlocks))
	}
	if cfg.MaxBytes > 0 {
		capBlocks = min(capBlocks, cfg.MaxBytes/(floats*cfg.DType.size()))
		if capBlocks == 0 {
			return nil, fmt.Errorf("kvcache: Config.MaxBytes = %d is less than one block of %d bytes",
				cfg.MaxBytes, floats*cfg.DType.size())
		}
	}
	return &Pool{
		layers:      cfg.Layers,
		kvDim:       cfg.KVDim,
		headDim:     cfg.HeadDim,
		heads:       cfg.KVDim / cfg.HeadDim,
		blockSize:   cfg.BlockSize,
		blockFloats: int(floats),
		capBlocks:   int(capBlocks),
		dtype:       cfg.DType,
	}, nil
}

// Config returns the pool's configuration, with defaults filled in and
// MaxBlocks set to the effective cap.
func (p *Pool) Config() Config {
	return Config{Layers: p.layers, KVDim: p.kvDim, BlockSize: p.blockSize, HeadDim: p.headDim,
		DType: p.dtype, MaxBlocks: p.capBlocks, MaxBytes: int64(p.capBlocks) * p.bytesPerBlock()}
}

// BlockSize returns the number of token positions per block.
func (p *Pool) BlockSize() int { return p.blockSize }

// DType returns the element type of the stored keys and values.
func (p *Pool) DType() ElemType { return p.dtype }

func (p *Pool) bytesPerBlock() int64 { return int64(p.blockFloats) * p.dtype.size() }

// NewSeq returns an empty sequence. It holds no block until the first Append.
func (p *Pool) NewSeq() *Seq { return &Seq{p: p} }

// Len returns the number of positions of s (0 for a freed sequence).
func (s *Seq) Len() int { return s.n }

// Fork returns a new sequence with the same positions as s, sharing all of its
// blocks. It copies only the block table and allocates no block, so it never
// fails. Forking a freed sequence returns another freed sequence.
func (p *Pool) Fork(s *Seq) *Seq {
	p.check(s)
	if s.freed {
		return &Seq{p: p, freed: true}
	}
	c := &Seq{p: p, n: s.n}
	if len(s.table) > 0 {
		c.table = make([]int32, len(s.table), len(s.table)+1) // room for the next block
		copy(c.table, s.table)
		ref, shared := p.ref, 0
		for _, id := range c.table {
			r := ref[id] + 1
			ref[id] = r
			if r == 2 {
				shared++
			}
		}
		p.shared += shared
		p.logical += len(c.table)
	}
	p.forks++
	return c
}

// Free releases s's references to its blocks. Freeing a sequence again is a
// no-op. A freed sequence has length 0; Append to it returns [ErrSeqFreed].
func (p *Pool) Free(s *Seq) {
	p.check(s)
	if s.freed {
		return
	}
	p.release(s.table)
	s.table, s.n, s.freed = nil, 0, true
}

// Truncate shortens s to its first n positions. Blocks wholly past n are
// released; a shared partial block kept at the end stays shared until the
// next Append copies it. The slots given back keep their data: a later
// Append there reserves a position holding stale data until written. n
// must be in [0, s.Len()].
func (p *Pool) Truncate(s *Seq, n int) error {
	p.check(s)
	if n < 0 || n > s.n {
		return fmt.Errorf("kvcache: Truncate to %d positions, want within [0, %d]", n, s.n)
	}
	keep := (n + p.blockSize - 1) / p.blockSize
	p.release(s.table[keep:])
	clear(s.table[keep:])
	s.table = s.table[:keep]
	s.n = n
	return nil
}

// Append reserves position s.Len() for writing and returns it. When the last
// block of s is full (or s has none) it takes a fresh block; when the last
// block is partial and shared with another sequence it takes a fresh block
// in its place, to be filled with a copy of it (copy on write), so that the block holding the new position is owned by s
// alone. When no block can be had, Append returns an error wrapping
// [ErrCacheFull] and leaves s unchanged.
//
// A copy on write is queued for the backend ([Pool.TakeCopies]). The new
// position's K and V are unspecified until the backend writes them: the
// slot holds whatever the block's earlier owner, or a position a
// [Pool.Truncate] gave back, left there, possibly NaN. Readers must not
// use a position before it is written, and attention reads only the
// written slots of a block.
func (p *Pool) Append(s *Seq) (pos int, err error) {
	p.check(s)
	if s.freed {
		return 0, ErrSeqFreed
	}
	slot := s.n % p.blockSize
	switch {
	case slot == 0:
		id, err := p.alloc()
		if err != nil {
			return 0, err
		}
		s.table = append(s.table, id)
	case p.ref[s.table[len(s.table)-1]] > 1:
		old := s.table[len(s.table)-1]
		id, err := p.alloc()
		if err != nil {
			return 0, err
		}
		p.copies = append(p.copies, Copy{Src: old, Dst: id, Used: slot})
		p.decRef(old)
		s.table[len(s.table)-1] = id
		p.cows++
	}
	// The new slot is not cleared, nor were the block's slots when it
	// was released: every reader masks the slots past a sequence's length,
	// and the forward pass writes a position before anything reads it.
	// (Zeroing released blocks, so that a new position read as zero, took
	// about a quarter of the search's own time outside the forward pass:
	// a search releases its pruned branches' blocks between two forward
	// passes, on the critical path.)
	s.n++
	p.appends++
	return s.n - 1, nil
}

// Copy is a copy on write to perform: the first Used slots of block Src
// (every layer's keys and values) into block Dst, which a sequence took in
// place of Src when it appended into Src while Src was shared. The
// backend's storage performs it before the forward pass writes Dst.
type Copy struct {
	Src, Dst int32
	Used     int
}

// TakeCopies appends to dst the copies on write decided since the last
// call, in the order [Pool.Append] decided them, and forgets them. A
// backend applies them in that order before a forward step writes (a later
// copy may read a block an earlier one wrote, or reuse a block an earlier
// one read), including after an Append that failed, or one the caller
// truncated away: the sequence keeps the copied block.
func (p *Pool) TakeCopies(dst []Copy) []Copy {
	dst = append(dst, p.copies...)
	p.copies = p.copies[:0]
	return dst
}

// BlocksToAppend is an upper bound on the blocks that n Appends to s take
// (fresh blocks and copies of a shared last block). Summed over several
// sequences it is an upper bound on the blocks their Appends need:
// siblings sharing a partial block need one copy fewer than their number
// when all of them append.
func (p *Pool) BlocksToAppend(s *Seq, n int) int {
	if n <= 0 {
		return 0
	}
	k := 0
	if p.AppendNeedsBlock(s) {
		k++
	}
	for q := s.Len() + 1; q < s.Len()+n; q++ {
		if q%p.blockSize == 0 {
			k++
		}
	}
	return k
}

// AppendNeedsBlock reports whether the next Append to s will take a block
// (a fresh one, or a copy of a shared last block). Summed over several
// sequences it is an upper bound on the blocks their Appends need: siblings
// sharing a partial block need one copy fewer than their number when all of
// them append.
func (p *Pool) AppendNeedsBlock(s *Seq) bool {
	p.check(s)
	if s.freed {
		return false
	}
	return s.n%p.blockSize == 0 || p.ref[s.table[len(s.table)-1]] > 1
}

// Referenced reports whether block id is held by a live sequence; a block
// that is not holds stale data only.
func (p *Pool) Referenced(id int) bool { return uint(id) < uint(len(p.ref)) && p.ref[id] > 0 }

// Blocks returns the length of s's block table.
func (p *Pool) Blocks(s *Seq) int { return len(s.table) }

// BlockID returns the id of the storage of block i of s (0 <= i <
// Blocks(s)): sequences whose block i has the same id share that block, so
// attention can read it once for all of them. Ids of freed blocks are
// reused; compare ids only between structural changes.
func (p *Pool) BlockID(s *Seq, i int) int {
	if s.p != p || uint(i) >= uint(len(s.table)) {
		p.badIndex(s, 0, i, "block")
	}
	return int(s.table[i])
}

// Owned reports whether the block holding position pos of s is referenced by
// s alone, i.e. whether the position may be written. It is false for
// positions out of range.
func (p *Pool) Owned(s *Seq, pos int) bool {
	if s.p != p || uint(pos) >= uint(s.n) {
		return false
	}
	return p.ref[s.table[pos/p.blockSize]] == 1
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool) Stats() Stats {
	inUse := len(p.ref) - len(p.free)
	bpb := p.bytesPerBlock()
	return Stats{
		BlocksInUse:     inUse,
		SharedBlocks:    p.shared,
		FreeBlocks:      p.capBlocks - inUse,
		CapBlocks:       p.capBlocks,
		AllocatedBlocks: len(p.ref),
		LogicalBlocks:   p.logical,
		BytesInUse:      int64(inUse) * bpb,
		BytesPerBlock:   bpb,
		BytesAllocated:  int64(len(p.ref)) * bpb,
		LogicalBytes:    int64(p.logical) * bpb,
		CopyOnWrites:    p.cows,
		Forks:           p.forks,
		Appends:         p.appends,
	}
}

// alloc takes a block with reference count 1 from the free list, or allocates
// storage for a new one while under the cap.
func (p *Pool) alloc() (int32, error) {
	var id int32
	if n := len(p.free); n > 0 {
		id = p.free[n-1]
		p.free = p.free[:n-1]
	} else if len(p.ref) < p.capBlocks {
		id = int32(len(p.ref))
		p.ref = append(p.ref, 0)
	} else {
		return 0, fmt.Errorf("%w: all %d blocks (%d bytes each) in use", ErrCacheFull, p.capBlocks, p.bytesPerBlock())
	}
	p.ref[id] = 1
	p.logical++
	return id, nil
}

func (p *Pool) decRef(id int32) {
	p.ref[id]--
	p.logical--
	switch p.ref[id] {
	case 1:
		p.shared--
	case 0:
		p.free = append(p.free, id) // as it is: see Append
	case -1:
		panic(fmt.Sprintf("kvcache: internal error: block %d reference count went negative", id))
	}
}

func (p *Pool) release(ids []int32) {
	for _, id := range ids {
		p.decRef(id)
	}
}

// check panics when s does not belong to p: mixing pools is a programming
// error that would otherwise corrupt reference counts.
func (p *Pool) check(s *Seq) {
	if s == nil || s.p != p {
		panic("kvcache: Seq is nil or belongs to a different Pool")
	}
}

//go:noinline
func (p *Pool) badIndex(s *Seq, l, i int, what string) {
	p.check(s)
	if uint(l) >= uint(p.layers) {
		panic(fmt.Sprintf("kvcache: layer %d out of range [0, %d)", l, p.layers))
	}
	limit := s.n
	if what == "block" {
		limit = len(s.table)
	}
	panic(fmt.Sprintf("kvcache: %s %d out of range [0, %d)", what, i, limit))
}
