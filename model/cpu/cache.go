package cpu

import (
	"fmt"
	"sync"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model/kernels"
)

// Cache is the CPU backend's key/value storage, addressed by the block ids
// of a block manager (kvcache.Pool, embedded: its sequences, forks and
// reference counts are the Cache's). It performs the copies on write the
// manager decides ([Cache.ApplyCopies]) and stores each block as the
// CPU's attention reads it.
//
// # Block layout
//
// Each block is one slice of Layers*2*BlockSize*KVDim elements: per
// layer, the keys of its BlockSize slots and then their values. The
// elements are float32 in an F32 cache and IEEE binary16 ([]uint16) in an
// F16 one (kvcache.Config.DType), which halves the memory and the bytes
// attention reads; writes round to nearest even, and the F16 kernels widen
// on load (kernels.ScoresTF16 and friends). Keys and values are stored
// head by head, one run of HeadDim*BlockSize floats per kv head, so that
// attention, which goes head by head, reads contiguous runs
// (position-major values, [slot][KVDim], put a head's rows KVDim apart: a
// 16-branch step with 32 private positions a branch spent 5% more in
// attention). A value run is [slot][HeadDim], as attention's weighted sum
// wants it (one broadcast probability times a row of values). A key run is
// in one of two layouts:
//
//   - staged, [slot][HeadDim]: as positions are written ([Cache.WriteKV]
//     copies a head's key into one contiguous row);
//   - sealed, [HeadDim][slot]: transposed, once the block is full
//     ([Cache.Seal], done by the forward pass when it writes a block's
//     last slot). The scores of one query against a sealed run are then
//     s[0:BlockSize] = sum over d of q[d] * K[d][0:BlockSize]: vector
//     multiply-adds across slots, with no horizontal sum per key (see
//     kernels.ScoresT).
//
// Writing every key transposed from the start would touch HeadDim cache
// lines per head and position, and reading a partly filled transposed
// block would load all of them for a few keys; staging the block that is
// being filled keeps both at a few lines per position, and the block is
// transposed once. A block copied on write keeps its layout; a block the
// manager hands out for a sequence's next position starts staged
// ([Cache.Appended]).
//
// # Stale data
//
// Storage is never cleared: a position reserved by Append holds
// unspecified data until written, possibly NaN (see package kvcache). The
// forward pass writes a step's positions before any of its rows attends,
// and reads a block's slots past the count a row sees only in lanes it
// discards ([Cache.KeyBlock]).
//
// # Concurrency
//
// The manager's structural methods, Append (which applies the copies it
// queues) and ApplyCopies run on one goroutine between forward steps.
// During a step any number of goroutines may call the accessors (WriteKV,
// Seal, ReadK, ReadV, KeyBlock, KeyBlockF16, KeySealed, ValueBlock,
// ValueBlockF16): they write only positions of blocks owned by one
// sequence (kvcache.Pool.Owned), and readers of shared blocks never race
// with them.
type Cache struct {
	*kvcache.Pool
	layers, kvDim, blockSize int
	headDim, heads           int // heads = KVDim / HeadDim
	blockFloats              int // Layers*2*BlockSize*KVDim
	dtype                    kvcache.ElemType

	// Block storage by id, grown to the manager's allocated blocks: f32 in
	// an F32 cache, f16 in an F16 one.
	f32 [][]float32
	f16 [][]uint16
	// sealed[(id*Layers+l)*heads+h] tells whether kv head h's keys of
	// layer l in block id are transposed.
	sealed []bool
	copies []kvcache.Copy // ApplyCopies' scratch
}

// NewCache returns storage for the blocks of p, which it takes over: Append
// through the Cache (or call ApplyCopies after appending to p).
func NewCache(p *kvcache.Pool) *Cache {
	c := p.Config()
	return &Cache{
		Pool: p, layers: c.Layers, kvDim: c.KVDim, blockSize: c.BlockSize,
		headDim: c.HeadDim, heads: c.KVDim / c.HeadDim,
		blockFloats: c.Layers * 2 * c.BlockSize * c.KVDim, dtype: c.DType,
	}
}

// Append is kvcache.Pool.Append followed by the copy on write it may
// decide ([Cache.ApplyCopies]) and [Cache.Appended].
func (c *Cache) Append(s *kvcache.Seq) (int, error) {
	pos, err := c.Pool.Append(s)
	c.ApplyCopies()
	if err == nil {
		c.Appended(s, pos)
	}
	return pos, err
}

// Appended readies the storage for position pos that s was just given
// by kvcache.Pool.Append, once the copies are applied: the first position
// of a block is the block's first use by s (a fresh block, or one reused
// from the free list, sealed by its last owner), which starts staged.
func (c *Cache) Appended(s *kvcache.Seq, pos int) {
	if pos%c.blockSize == 0 {
		id := c.id(s, pos/c.blockSize)
		clear(c.sealed[c.sealIndex(id, 0, 0):c.sealIndex(id+1, 0, 0)])
	}
}

// ApplyCopies gives every block the manager has handed out storage, and
// performs the copies on write it has queued, in order.
func (c *Cache) ApplyCopies() {
	for n := c.Pool.Stats().AllocatedBlocks; len(c.f32)+len(c.f16) < n; {
		if c.dtype == kvcache.F16 {
			c.f16 = append(c.f16, make([]uint16, c.blockFloats))
		} else {
			c.f32 = append(c.f32, make([]float32, c.blockFloats))
		}
		c.sealed = append(c.sealed, make([]bool, c.layers*c.heads)...)
	}
	c.copies = c.Pool.TakeCopies(c.copies[:0])
	for _, cp := range c.copies {
		c.copyBlock(cp.Dst, cp.Src, cp.Used)
	}
}

// elem is the element type of block storage.
type elem interface{ float32 | uint16 }

// copyBlock copies into block dst what the first used slots of block src
// hold, with src's sealing: for each layer and kv head a sealed run whole
// (its used slots are spread over every row) or the used rows of a staged
// one, and each head's used value rows. dst's other slots keep their stale
// data.
func (c *Cache) copyBlock(dst, src int32, used int) {
	if c.dtype == kvcache.F16 {
		copyUsed(c, c.f16[dst], c.f16[src], dst, src, used)
	} else {
		copyUsed(c, c.f32[dst], c.f32[src], dst, src, used)
	}
}

func copyUsed[E elem](c *Cache, d, sb []E, dst, src int32, used int) {
	run := c.headDim * c.blockSize
	for l := range c.layers {
		base := 2 * l * c.blockSize * c.kvDim
		for h := range c.heads {
			i := c.sealIndex(src, l, h)
			off, n := base+h*run, used*c.headDim
			if c.sealed[i] {
				n = run
			}
			copy(d[off:off+n], sb[off:off+n])
			c.sealed[c.sealIndex(dst, l, h)] = c.sealed[i]
		}
		for h := range c.heads {
			v := base + c.blockSize*c.kvDim + h*run
			copy(d[v:v+used*c.headDim], sb[v:v+used*c.headDim])
		}
	}
}

func (c *Cache) sealIndex(id int32, l, h int) int { return (int(id)*c.layers+l)*c.heads + h }

// id returns the block id of block i of s.
func (c *Cache) id(s *kvcache.Seq, i int) int32 { return int32(c.Pool.BlockID(s, i)) }

// WriteKV stores the key k and the value v (KVDim floats each) of layer l
// at position pos of s, which must satisfy 0 <= l < Layers and
// 0 <= pos < s.Len(), and kvcache.Pool.Owned(s, pos): it panics on a
// position of a shared block. Each head's key goes into its run of the
// block in that run's layout (see [Cache.KeyBlock]): one contiguous row
// while staged, scattered over the rows once sealed. An F16 cache rounds
// both to the nearest binary16.
func (c *Cache) WriteKV(s *kvcache.Seq, l, pos int, k, v []float32) {
	if len(k) != c.kvDim || len(v) != c.kvDim {
		panic(fmt.Sprintf("cpu: WriteKV of %d keys and %d values, want KVDim = %d", len(k), len(v), c.kvDim))
	}
	off, slot := c.slotOf(s, l, pos)
	if !c.Pool.Owned(s, pos) {
		panic(fmt.Sprintf("cpu: WriteKV at position %d of a shared block", pos))
	}
	id := c.id(s, pos/c.blockSize)
	if c.dtype == kvcache.F16 {
		writeKV(c, c.f16[id][off:off+2*c.blockSize*c.kvDim], id, l, slot, k, v, kernels.ToHalf, kernels.FloatToHalf)
	} else {
		writeKV(c, c.f32[id][off:off+2*c.blockSize*c.kvDim], id, l, slot, k, v, copyF32, identity)
	}
}

func copyF32(dst, src []float32)           { copy(dst, src) }
func identity(f float32) float32           { return f }
func widenF32(dst, src []float32)          { copy(dst, src) }
func fromF32(f float32) float32            { return f }
func widenF16(dst []float32, src []uint16) { kernels.FromHalf(dst, src) }

// writeKV is WriteKV on layer l of a block, b: conv stores a run, one
// converts an element.
func writeKV[E elem](c *Cache, b []E, id int32, l, slot int, k, v []float32, conv func([]E, []float32), one func(float32) E) {
	hd, bs := c.headDim, c.blockSize
	for h := range c.heads {
		src, run := k[h*hd:(h+1)*hd], b[h*hd*bs:(h+1)*hd*bs]
		if !c.sealed[c.sealIndex(id, l, h)] {
			conv(run[slot*hd:][:hd], src)
			continue
		}
		col := run[slot:]
		for i, f := range src {
			col[i*bs] = one(f)
		}
	}
	vals := b[bs*c.kvDim:]
	for h := range c.heads {
		conv(vals[h*hd*bs+slot*hd:][:hd], v[h*hd:(h+1)*hd])
	}
}

// ReadK copies the key (KVDim floats) of layer l at position pos of s into
// dst, which must hold at least KVDim floats; the indices must satisfy
// 0 <= l < Layers and 0 <= pos < s.Len(). A key is not one contiguous
// vector in the cache (see [Cache.KeyBlock]); ReadK is for tests and
// inspection, attention reads whole blocks. A position not yet written
// since its Append reads unspecified (stale) data.
func (c *Cache) ReadK(s *kvcache.Seq, l, pos int, dst []float32) {
	if len(dst) < c.kvDim {
		panic(fmt.Sprintf("cpu: ReadK into %d floats, want KVDim = %d", len(dst), c.kvDim))
	}
	off, slot := c.slotOf(s, l, pos)
	id := c.id(s, pos/c.blockSize)
	if c.dtype == kvcache.F16 {
		readK(c, c.f16[id][off:], id, l, slot, dst, widenF16, kernels.HalfToFloat)
	} else {
		readK(c, c.f32[id][off:], id, l, slot, dst, widenF32, fromF32)
	}
}

func readK[E elem](c *Cache, b []E, id int32, l, slot int, dst []float32, conv func([]float32, []E), one func(E) float32) {
	hd, bs := c.headDim, c.blockSize
	for h := range c.heads {
		run, out := b[h*hd*bs:(h+1)*hd*bs], dst[h*hd:(h+1)*hd]
		if !c.sealed[c.sealIndex(id, l, h)] {
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
func (c *Cache) ReadV(s *kvcache.Seq, l, pos int, dst []float32) {
	if len(dst) < c.kvDim {
		panic(fmt.Sprintf("cpu: ReadV into %d floats, want KVDim = %d", len(dst), c.kvDim))
	}
	off, slot := c.slotOf(s, l, pos)
	id := c.id(s, pos/c.blockSize)
	hd, run := c.headDim, c.headDim*c.blockSize
	for h := range c.heads {
		o := off + c.blockSize*c.kvDim + h*run + slot*hd
		if c.dtype == kvcache.F16 {
			kernels.FromHalf(dst[h*hd:(h+1)*hd], c.f16[id][o:o+hd])
		} else {
			copy(dst[h*hd:(h+1)*hd], c.f32[id][o:o+hd])
		}
	}
}

// want panics unless the cache stores t.
func (c *Cache) want(t kvcache.ElemType, what string) {
	if c.dtype != t {
		panic(fmt.Sprintf("cpu: %s on a %v cache, want %v", what, c.dtype, t))
	}
}

// slotOf returns the offset of layer l in the block holding position pos
// of s (K then V, 2*BlockSize*KVDim elements from there) and the
// position's slot in the block.
func (c *Cache) slotOf(s *kvcache.Seq, l, pos int) (int, int) {
	if uint(l) >= uint(c.layers) || uint(pos) >= uint(s.Len()) {
		c.badIndex(s, l, pos, s.Len(), "position")
	}
	return 2 * l * c.blockSize * c.kvDim, pos % c.blockSize
}

// KeyBlock returns the keys of layer l in block i of s (0 <= i <
// Blocks(s)): BlockSize*KVDim floats, one run of HeadDim*BlockSize floats
// per kv head. A head's run is staged, [slot][HeadDim] (position-major, as
// keys are written), or, once sealed ([Cache.Seal], [Cache.KeySealed]),
// transposed, [HeadDim][slot]: dimension d of the key in slot j is then at
// d*BlockSize+j, and a query's scores against the block are vector
// multiply-adds across slots. The block holds positions i*BlockSize+j for
// j < min(BlockSize, s.Len()-i*BlockSize), each of them unspecified until
// written; slots past that count hold stale data (whatever an earlier
// owner of the block, or a truncated position, left there, possibly NaN or
// Inf), which callers must ignore (mask): attention may read them only in
// lanes it discards, never multiply them into a sum. KeyBlock is for F32
// caches (it panics in an F16 one); [Cache.KeyBlockF16] is the same for
// F16.
func (c *Cache) KeyBlock(s *kvcache.Seq, l, i int) []float32 {
	off, end := c.keyRange(s, l, i)
	c.want(kvcache.F32, "KeyBlock")
	return c.f32[c.id(s, i)][off:end:end]
}

// KeyBlockF16 is [Cache.KeyBlock] for an F16 cache (it panics in an F32
// one): the same layout, in binary16.
func (c *Cache) KeyBlockF16(s *kvcache.Seq, l, i int) []uint16 {
	off, end := c.keyRange(s, l, i)
	c.want(kvcache.F16, "KeyBlockF16")
	return c.f16[c.id(s, i)][off:end:end]
}

func (c *Cache) keyRange(s *kvcache.Seq, l, i int) (off, end int) {
	if uint(l) >= uint(c.layers) || uint(i) >= uint(c.Pool.Blocks(s)) {
		c.badIndex(s, l, i, c.Pool.Blocks(s), "block")
	}
	half := c.blockSize * c.kvDim
	return 2 * l * half, (2*l + 1) * half
}

// KeySealed reports whether kv head h's keys of layer l in block i of s are
// sealed (transposed); see [Cache.KeyBlock].
func (c *Cache) KeySealed(s *kvcache.Seq, l, i, h int) bool {
	if uint(l) >= uint(c.layers) || uint(i) >= uint(c.Pool.Blocks(s)) || uint(h) >= uint(c.heads) {
		c.badHead(s, l, i, h)
	}
	return c.sealed[c.sealIndex(c.id(s, i), l, h)]
}

// Seal transposes kv head h's keys of layer l in block i of s, once every
// slot of the block holds a written position: the block must be full
// (s.Len() >= (i+1)*BlockSize) and owned by s alone (kvcache.Pool.Owned).
// Sealing a sealed head does nothing. Keys are written position-major (one
// contiguous run per head and position) and read transposed; sealing a
// block when it fills, rather than writing every key transposed, keeps the
// writes and the reads of a partly filled block to a few cache lines per
// position.
//
// Seal writes the head's keys: it must not run concurrently with readers of
// them, but may for other heads, layers or blocks.
func (c *Cache) Seal(s *kvcache.Seq, l, i, h int) {
	if uint(l) >= uint(c.layers) || uint(i) >= uint(c.Pool.Blocks(s)) || uint(h) >= uint(c.heads) {
		c.badHead(s, l, i, h)
	}
	if s.Len() < (i+1)*c.blockSize || !c.Pool.Owned(s, i*c.blockSize) {
		panic(fmt.Sprintf("cpu: Seal of block %d: %d of its %d slots used, owned %v, want full and owned",
			i, min(c.blockSize, max(0, s.Len()-i*c.blockSize)), c.blockSize, c.Pool.Owned(s, i*c.blockSize)))
	}
	id := c.id(s, i)
	si := c.sealIndex(id, l, h)
	if c.sealed[si] {
		return
	}
	hd, bs := c.headDim, c.blockSize
	base := (2*l*c.kvDim + h*hd) * bs
	if c.dtype == kvcache.F16 {
		transposeInPlace(c.f16[id][base:base+hd*bs], bs, hd, &scratch16)
	} else {
		transposeInPlace(c.f32[id][base:base+hd*bs], bs, hd, &scratch32)
	}
	c.sealed[si] = true
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
// that callers must mask, as [Cache.KeyBlock]'s. 0 <= i < Blocks(s) is
// required. ValueBlock is for F32 caches (it panics in an F16 one);
// [Cache.ValueBlockF16] is the same for F16.
func (c *Cache) ValueBlock(s *kvcache.Seq, l, i int) []float32 {
	off, end := c.valueRange(s, l, i)
	c.want(kvcache.F32, "ValueBlock")
	return c.f32[c.id(s, i)][off:end:end]
}

// ValueBlockF16 is [Cache.ValueBlock] for an F16 cache (it panics in an
// F32 one): the same layout, in binary16.
func (c *Cache) ValueBlockF16(s *kvcache.Seq, l, i int) []uint16 {
	off, end := c.valueRange(s, l, i)
	c.want(kvcache.F16, "ValueBlockF16")
	return c.f16[c.id(s, i)][off:end:end]
}

func (c *Cache) valueRange(s *kvcache.Seq, l, i int) (off, end int) {
	if uint(l) >= uint(c.layers) || uint(i) >= uint(c.Pool.Blocks(s)) {
		c.badIndex(s, l, i, c.Pool.Blocks(s), "block")
	}
	off = (2*l + 1) * c.blockSize * c.kvDim
	return off, off + c.blockSize*c.kvDim
}

//go:noinline
func (c *Cache) badHead(s *kvcache.Seq, l, i, h int) {
	if uint(h) >= uint(c.heads) {
		panic(fmt.Sprintf("cpu: kv head %d out of range [0, %d)", h, c.heads))
	}
	c.badIndex(s, l, i, c.Pool.Blocks(s), "block")
}

//go:noinline
func (c *Cache) badIndex(s *kvcache.Seq, l, i, limit int, what string) {
	if uint(l) >= uint(c.layers) {
		panic(fmt.Sprintf("cpu: layer %d out of range [0, %d)", l, c.layers))
	}
	panic(fmt.Sprintf("cpu: %s %d out of range [0, %d)", what, i, limit))
}
