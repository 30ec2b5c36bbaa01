package kvcache

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/entropix-search/entropix-search/model/kernels"
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

// DType is the element type the cache stores keys and values in.
type DType uint8

const (
	// F32 stores float32: keys and values exactly as the forward pass
	// computes them.
	F32 DType = iota
	// F16 stores IEEE binary16 (as llama.cpp does by default): half the
	// memory, and half the bytes attention reads, for a rounding of about
	// 2^-11 relative per element. Writes round to nearest even.
	F16
)

func (t DType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("DType(%d)", uint8(t))
}

// MarshalText writes the type's name (JSON: "f16").
func (t DType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a name ParseDType accepts.
func (t *DType) UnmarshalText(b []byte) error {
	v, err := ParseDType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseDType reads a DType from its name, "f32" or "f16" (any case).
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "f32":
		return F32, nil
	case "f16":
		return F16, nil
	}
	return 0, fmt.Errorf("kvcache: unknown KV cache type %q (want f32 or f16)", s)
}

// size is the bytes of one element.
func (t DType) size() int64 {
	if t == F16 {
		return 2
	}
	return 4
}

// Config describes the shape of the cached tensors and the memory cap.
type Config struct {
	Layers    int // transformer layers
	KVDim     int // kv heads * head dim: floats per position per layer for K, and as many for V
	BlockSize int // token positions per block; DefaultBlockSize when 0
	DType     DType

	// HeadDim is the size of one kv head; it must divide KVDim. When 0 it
	// is KVDim (the keys are then laid out as if there were one head). The
	// keys of a block are stored head by head, and each head's keys are
	// sealed (transposed) on their own; see [Pool.KeyBlock].
	HeadDim int

	// The pool holds at most MaxBlocks blocks. When MaxBlocks is 0 the cap is
	// derived from MaxBytes (rounded down to whole blocks); when both are set
	// the smaller cap wins. At least one of them must be positive.
	MaxBlocks int
	MaxBytes  int64
}

// Pool owns the blocks of K/V storage and their reference counts. See the
// package documentation for the concurrency contract.
type Pool struct {
	layers, kvDim, blockSize int
	headDim, heads           int // heads = KVDim / HeadDim
	blockFloats              int // Layers*2*BlockSize*KVDim
	capBlocks                int
	dtype                    DType

	// Block storage by id, allocated lazily: f32 in an F32 pool, f16 in an
	// F16 pool.
	// A released block goes straight back on the free list with whatever
	// its last owner wrote: nothing reads a slot before it is written (see
	// Append), so the pool never zeroes storage.
	f32  [][]float32
	f16  [][]uint16
	ref  []int32 // reference count by id; len(ref) blocks have storage
	free []int32 // ids with ref == 0, reused LIFO
	// sealed[(id*Layers+l)*heads+h] tells whether kv head h's keys of
	// layer l in block id are transposed.
	sealed []bool

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

	CopyOnWrites uint64 // blocks copied by Append because they were shared
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
func (p *Pool) DType() DType { return p.dtype }

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
// block is partial and shared with another sequence it first copies that block
// (copy on write), so that the block holding the new position is owned by s
// alone. When no block can be had, Append returns an error wrapping
// [ErrCacheFull] and leaves s unchanged.
//
// The new position's K and V are unspecified until written
// ([Pool.WriteKV]): the slot holds whatever the block's earlier owner,
// or a position a [Pool.Truncate] gave back, left there, possibly NaN.
// Readers must not use a position before it is written, and attention
// reads only the written slots of a block (see [Pool.KeyBlock]).
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
		p.copyBlock(id, old, slot)
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

// elem is the element type of block storage.
type elem interface{ float32 | uint16 }

// copyBlock copies into block dst what the first used slots of block src
// hold, with src's sealing: for each layer and kv head a sealed run whole
// (its used slots are spread over every row) or the used rows of a staged
// one, and each head's used value rows. dst's other slots keep their stale
// data.
func (p *Pool) copyBlock(dst, src int32, used int) {
	if p.dtype == F16 {
		copyUsed(p, p.f16[dst], p.f16[src], dst, src, used)
	} else {
		copyUsed(p, p.f32[dst], p.f32[src], dst, src, used)
	}
}

func copyUsed[E elem](p *Pool, d, sb []E, dst, src int32, used int) {
	run := p.headDim * p.blockSize
	for l := range p.layers {
		base := 2 * l * p.blockSize * p.kvDim
		for h := range p.heads {
			i := p.sealIndex(src, l, h)
			off, n := base+h*run, used*p.headDim
			if p.sealed[i] {
				n = run
			}
			copy(d[off:off+n], sb[off:off+n])
			p.sealed[p.sealIndex(dst, l, h)] = p.sealed[i]
		}
		for h := range p.heads {
			v := base + p.blockSize*p.kvDim + h*run
			copy(d[v:v+used*p.headDim], sb[v:v+used*p.headDim])
		}
	}
}

func (p *Pool) sealIndex(id int32, l, h int) int { return (int(id)*p.layers+l)*p.heads + h }

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

// WriteKV stores the key k and the value v (KVDim floats each) of layer l
// at position pos of s, which must satisfy 0 <= l < Layers and
// 0 <= pos < s.Len(), and [Pool.Owned](s, pos): it panics on a position of
// a shared block. Each head's key goes into its run of the block in that
// run's layout (see [Pool.KeyBlock]): one contiguous row while staged,
// scattered over the rows once sealed. An F16 pool rounds both to the
// nearest binary16.
func (p *Pool) WriteKV(s *Seq, l, pos int, k, v []float32) {
	if len(k) != p.kvDim || len(v) != p.kvDim {
		panic(fmt.Sprintf("kvcache: WriteKV of %d keys and %d values, want KVDim = %d", len(k), len(v), p.kvDim))
	}
	off, slot := p.slotOf(s, l, pos)
	id := s.table[pos/p.blockSize]
	if p.ref[id] != 1 {
		panic(fmt.Sprintf("kvcache: WriteKV at position %d of a shared block", pos))
	}
	if p.dtype == F16 {
		writeKV(p, p.f16[id][off:off+2*p.blockSize*p.kvDim], id, l, slot, k, v, kernels.ToHalf, kernels.FloatToHalf)
	} else {
		writeKV(p, p.f32[id][off:off+2*p.blockSize*p.kvDim], id, l, slot, k, v, copyF32, identity)
	}
}

func copyF32(dst, src []float32)           { copy(dst, src) }
func identity(f float32) float32           { return f }
func widenF32(dst, src []float32)          { copy(dst, src) }
func fromF32(f float32) float32            { return f }
func widenF16(dst []float32, src []uint16) { kernels.FromHalf(dst, src) }

// writeKV is WriteKV on layer l of a block, b: conv stores a run, one
// converts an element.
func writeKV[E elem](p *Pool, b []E, id int32, l, slot int, k, v []float32, conv func([]E, []float32), one func(float32) E) {
	hd, bs := p.headDim, p.blockSize
	for h := range p.heads {
		src, run := k[h*hd:(h+1)*hd], b[h*hd*bs:(h+1)*hd*bs]
		if !p.sealed[p.sealIndex(id, l, h)] {
			conv(run[slot*hd:][:hd], src)
			continue
		}
		col := run[slot:]
		for i, f := range src {
			col[i*bs] = one(f)
		}
	}
	vals := b[bs*p.kvDim:]
	for h := range p.heads {
		conv(vals[h*hd*bs+slot*hd:][:hd], v[h*hd:(h+1)*hd])
	}
}

// ReadK copies the key (KVDim floats) of layer l at position pos of s into
// dst, which must hold at least KVDim floats; the indices must satisfy
// 0 <= l < Layers and 0 <= pos < s.Len(). A key is not one contiguous
// vector in the cache (see [Pool.KeyBlock]); ReadK is for tests and
// inspection, attention reads whole blocks. A position not yet written
// since its Append reads unspecified (stale) data.
func (p *Pool) ReadK(s *Seq, l, pos int, dst []float32) {
	if len(dst) < p.kvDim {
		panic(fmt.Sprintf("kvcache: ReadK into %d floats, want KVDim = %d", len(dst), p.kvDim))
	}
	off, slot := p.slotOf(s, l, pos)
	id := s.table[pos/p.blockSize]
	if p.dtype == F16 {
		readK(p, p.f16[id][off:], id, l, slot, dst, widenF16, kernels.HalfToFloat)
	} else {
		readK(p, p.f32[id][off:], id, l, slot, dst, widenF32, fromF32)
	}
}

func readK[E elem](p *Pool, b []E, id int32, l, slot int, dst []float32, conv func([]float32, []E), one func(E) float32) {
	hd, bs := p.headDim, p.blockSize
	for h := range p.heads {
		run, out := b[h*hd*bs:(h+1)*hd*bs], dst[h*hd:(h+1)*hd]
		if !p.sealed[p.sealIndex(id, l, h)] {
			conv(out, run[slot*hd:][:hd])
			continue
		}
		for i := range out {
			out[i] = one(run[slot+i*bs])
		}
	}
}

// ReadV copies the value (KVDim floats) of layer l at position pos of s
// into dst, which must hold at least KVDim floats; the indices must
// satisfy 0 <= l < Layers and 0 <= pos < s.Len(). As with ReadK, a
// position not yet written reads unspecified data.
func (p *Pool) ReadV(s *Seq, l, pos int, dst []float32) {
	if len(dst) < p.kvDim {
		panic(fmt.Sprintf("kvcache: ReadV into %d floats, want KVDim = %d", len(dst), p.kvDim))
	}
	off, slot := p.slotOf(s, l, pos)
	id := s.table[pos/p.blockSize]
	hd, run := p.headDim, p.headDim*p.blockSize
	for h := range p.heads {
		o := off + p.blockSize*p.kvDim + h*run + slot*hd
		if p.dtype == F16 {
			kernels.FromHalf(dst[h*hd:(h+1)*hd], p.f16[id][o:o+hd])
		} else {
			copy(dst[h*hd:(h+1)*hd], p.f32[id][o:o+hd])
		}
	}
}

// want panics unless the pool stores t.
func (p *Pool) want(t DType, what string) {
	if p.dtype != t {
		panic(fmt.Sprintf("kvcache: %s on a %v pool, want %v", what, p.dtype, t))
	}
}

// slotOf returns the offset of layer l in the block holding position pos
// of s (K then V, 2*BlockSize*KVDim elements from there) and the
// position's slot in the block.
func (p *Pool) slotOf(s *Seq, l, pos int) (int, int) {
	if s.p != p || uint(l) >= uint(p.layers) || uint(pos) >= uint(s.n) {
		p.badIndex(s, l, pos, "position")
	}
	return 2 * l * p.blockSize * p.kvDim, pos % p.blockSize
}

// KeyBlock returns the keys of layer l in block i of s (0 <= i <
// Blocks(s)): BlockSize*KVDim floats, one run of HeadDim*BlockSize floats
// per kv head. A head's run is staged, [slot][HeadDim] (position-major, as
// keys are written), or, once sealed ([Pool.Seal], [Pool.KeySealed]),
// transposed, [HeadDim][slot]: dimension d of the key in slot j is then at
// d*BlockSize+j, and a query's scores against the block are vector
// multiply-adds across slots. The block holds positions i*BlockSize+j for
// j < min(BlockSize, s.Len()-i*BlockSize), each of them unspecified until
// written ([Pool.Append]); slots past that count hold stale data (whatever
// an earlier owner of the block, or a truncated position, left there,
// possibly NaN or Inf), which callers must ignore (mask): attention may
// read them only in lanes it discards, never multiply them into a sum.
// KeyBlock is for F32 pools (it panics in an F16 one); [Pool.KeyBlockF16]
// is the same for F16.
func (p *Pool) KeyBlock(s *Seq, l, i int) []float32 {
	off, end := p.keyRange(s, l, i)
	p.want(F32, "KeyBlock")
	return p.f32[s.table[i]][off:end:end]
}

// KeyBlockF16 is [Pool.KeyBlock] for an F16 pool (it panics in an F32
// one): the same layout, in binary16.
func (p *Pool) KeyBlockF16(s *Seq, l, i int) []uint16 {
	off, end := p.keyRange(s, l, i)
	p.want(F16, "KeyBlockF16")
	return p.f16[s.table[i]][off:end:end]
}

func (p *Pool) keyRange(s *Seq, l, i int) (off, end int) {
	if s.p != p || uint(l) >= uint(p.layers) || uint(i) >= uint(len(s.table)) {
		p.badIndex(s, l, i, "block")
	}
	half := p.blockSize * p.kvDim
	return 2 * l * half, (2*l + 1) * half
}

// KeySealed reports whether kv head h's keys of layer l in block i of s are
// sealed (transposed); see [Pool.KeyBlock].
func (p *Pool) KeySealed(s *Seq, l, i, h int) bool {
	if s.p != p || uint(l) >= uint(p.layers) || uint(i) >= uint(len(s.table)) || uint(h) >= uint(p.heads) {
		p.badHead(s, l, i, h)
	}
	return p.sealed[p.sealIndex(s.table[i], l, h)]
}

// Seal transposes kv head h's keys of layer l in block i of s, once every
// slot of the block holds a written position: the block must be full
// (s.Len() >= (i+1)*BlockSize) and owned by s alone ([Pool.Owned]). Sealing
// a sealed head does nothing. Keys are written position-major (one
// contiguous run per head and position) and read transposed; sealing a
// block when it fills, rather than writing every key transposed, keeps the
// writes and the reads of a partly filled block to a few cache lines per
// position.
//
// Seal writes the head's keys: it must not run concurrently with readers of
// them, but may for other heads, layers or blocks.
func (p *Pool) Seal(s *Seq, l, i, h int) {
	if s.p != p || uint(l) >= uint(p.layers) || uint(i) >= uint(len(s.table)) || uint(h) >= uint(p.heads) {
		p.badHead(s, l, i, h)
	}
	id := s.table[i]
	if s.n < (i+1)*p.blockSize || p.ref[id] != 1 {
		panic(fmt.Sprintf("kvcache: Seal of block %d: %d of its %d slots used, %d references, want full and owned",
			i, min(p.blockSize, max(0, s.n-i*p.blockSize)), p.blockSize, p.ref[id]))
	}
	si := p.sealIndex(id, l, h)
	if p.sealed[si] {
		return
	}
	hd, bs := p.headDim, p.blockSize
	base := (2*l*p.kvDim + h*hd) * bs
	if p.dtype == F16 {
		transposeInPlace(p.f16[id][base:base+hd*bs], bs, hd, &scratch16)
	} else {
		transposeInPlace(p.f32[id][base:base+hd*bs], bs, hd, &scratch32)
	}
	p.sealed[si] = true
}

// transposeInPlace turns x, rows x cols row-major, into its transpose,
// cols x rows row-major, through a scratch copy from scratch.
func transposeInPlace[E elem](x []E, rows, cols int, scratch *sync.Pool) {
	bp, _ := scratch.Get().(*[]E)
	if bp == nil {
		bp = new([]E)
	}
	if cap(*bp) < len(x) {
		*bp = make([]E, len(x))
	}
	t := (*bp)[:len(x)]
	copy(t, x)
	kernels.Transpose(x, t, rows, cols) // a gather per column: 16x64 halves in 0.1 µs, not 0.9
	scratch.Put(bp)
}

// Scratch buffers of Seal's transposition, by element type.
var scratch32, scratch16 sync.Pool

// ValueBlock returns the values of layer l in block i of s: BlockSize*KVDim
// floats, head by head, kv head h's a run of BlockSize rows of HeadDim
// floats at h*BlockSize*HeadDim (as the keys' staged layout); the slots
// of positions [i*BlockSize, min((i+1)*BlockSize, s.Len())) are the
// sequence's (each unspecified until written), the others hold stale data
// that callers must mask, as [Pool.KeyBlock]'s. 0 <= i < Blocks(s) is
// required. ValueBlock is for F32 pools (it panics in an F16 one);
// [Pool.ValueBlockF16] is the same for F16.
func (p *Pool) ValueBlock(s *Seq, l, i int) []float32 {
	off, end := p.valueRange(s, l, i)
	p.want(F32, "ValueBlock")
	return p.f32[s.table[i]][off:end:end]
}

// ValueBlockF16 is [Pool.ValueBlock] for an F16 pool (it panics in an F32
// one): the same layout, in binary16.
func (p *Pool) ValueBlockF16(s *Seq, l, i int) []uint16 {
	off, end := p.valueRange(s, l, i)
	p.want(F16, "ValueBlockF16")
	return p.f16[s.table[i]][off:end:end]
}

func (p *Pool) valueRange(s *Seq, l, i int) (off, end int) {
	if s.p != p || uint(l) >= uint(p.layers) || uint(i) >= uint(len(s.table)) {
		p.badIndex(s, l, i, "block")
	}
	off = (2*l + 1) * p.blockSize * p.kvDim
	return off, off + p.blockSize*p.kvDim
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
		clear(p.sealed[p.sealIndex(id, 0, 0):p.sealIndex(id+1, 0, 0)])
	} else if len(p.ref) < p.capBlocks {
		id = int32(len(p.ref))
		if p.dtype == F16 {
			p.f16 = append(p.f16, make([]uint16, p.blockFloats))
		} else {
			p.f32 = append(p.f32, make([]float32, p.blockFloats))
		}
		p.ref = append(p.ref, 0)
		p.sealed = append(p.sealed, make([]bool, p.layers*p.heads)...)
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
func (p *Pool) badHead(s *Seq, l, i, h int) {
	if uint(h) >= uint(p.heads) {
		panic(fmt.Sprintf("kvcache: kv head %d out of range [0, %d)", h, p.heads))
	}
	p.badIndex(s, l, i, "block")
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
