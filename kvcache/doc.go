// Package kvcache is a paged, copy-on-write key/value cache for
// transformer attention, in the spirit of vLLM's block manager.
//
// A tree search decodes many branches that share a prompt prefix and, further
// down, each other's partial continuations. Storing one private K/V copy per
// branch would cost memory proportional to the number of branches times the
// prefix length. Instead the cache is cut into fixed-size blocks of BlockSize
// token positions, and a sequence ([Seq]) is just a block table (the ids of
// its blocks, in order) plus a length.
//
// # Reference-counted blocks
//
// Every block carries a reference count: the number of live sequences whose
// block table holds it. [Pool.Fork] copies the parent's block table and adds
// one reference to each block; no K/V data is copied and no block is
// allocated, so a fork never fails. [Pool.Free] and [Pool.Truncate] drop
// references, and a block whose count reaches zero goes, as it is, to a
// free list from which later allocations are served. Block storage is
// allocated lazily, one block at a time, up to the configured cap
// ([Config.MaxBlocks] or [Config.MaxBytes]); when the cap is reached and
// the free list is empty, [Pool.Append] reports [ErrCacheFull] and leaves
// the sequence unchanged, so the engine can prune branches and retry.
// Storage of freed blocks is kept for reuse, never returned to the
// runtime, until the Pool is dropped.
//
// # Stale data
//
// The pool never clears storage. A position reserved by [Pool.Append]
// holds unspecified data until it is written ([Pool.WriteKV]): whatever
// the block's earlier owner left there (a reused block), or what a
// position that [Pool.Truncate] gave back held; it may be NaN. Likewise
// the slots of a block past its sequence's length. Nothing needs zeros:
// the forward pass writes a step's positions before any of its rows
// attends, attends only over positions it has written, and reads a
// block's slots past the count a row sees only in lanes it discards
// ([Pool.KeyBlock]). Zeroing released blocks, as the pool once did so
// that a new position read as zero, took about a quarter of the search's
// own time outside the forward pass: a search releases its pruned
// branches' blocks between two forward passes, on the critical path.
//
// # Copy on write of the last, partial block
//
// A decoding step writes only the position it appends, so the only block that
// can need a private copy is the last one of a sequence, and only while it is
// partially filled: [Pool.Append] into a full last block (or
// an empty sequence) takes a fresh block, and Append into a partial last block
// whose reference count is above one first copies that block (the positions
// already used; a sealed head's keys whole) into a fresh block owned by the
// appending sequence. Full
// shared blocks are never copied. After a fork inside a block, the first of
// parent and child to append pays for one block copy; the other then owns the
// original block and copies nothing.
//
// # Block layout
//
// Each block is one slice of Layers*2*BlockSize*KVDim elements: per
// layer, the keys of its BlockSize slots and then their values. The
// elements are float32 in an F32 pool and IEEE binary16 ([]uint16) in an
// F16 one ([Config.DType]), which halves the memory and the bytes
// attention reads; writes round to nearest even, and the forward pass's
// F16 kernels widen on load (kernels.ScoresTF16 and friends). Keys and
// values are stored head by head, one run of HeadDim*BlockSize floats per
// kv head, so that attention, which goes head by head, reads contiguous
// runs (position-major values, [slot][KVDim], put a head's rows KVDim
// apart: a 16-branch step with 32 private positions a branch spent 5%
// more in attention). A value run is [slot][HeadDim], as attention's
// weighted sum wants it (one broadcast probability times a row of
// values). A key run is in one of two layouts:
//
//   - staged, [slot][HeadDim]: as positions are written ([Pool.WriteKV]
//     copies a head's key into one contiguous row);
//   - sealed, [HeadDim][slot]: transposed, once the block is full
//     ([Pool.Seal], done by the forward pass when it writes a block's last
//     slot). The scores of one query against a sealed run are then
//     s[0:BlockSize] = sum over d of q[d] * K[d][0:BlockSize]: vector
//     multiply-adds across slots, with no horizontal sum per key (see
//     kernels.ScoresT).
//
// Writing every key transposed from the start would touch HeadDim cache
// lines per head and position, and reading a partly filled transposed
// block would load all of them for a few keys; staging the block that is
// being filled keeps both at a few lines per position, and the block is
// transposed once. [Pool.KeyBlock] and [Pool.KeySealed] expose one layer of
// a block, [Pool.ValueBlock] its values, and [Pool.ReadK] gathers a key
// back whatever its layout. A block copied on write keeps its layout; a
// block taken from the free list starts staged.
//
// # Concurrency contract
//
// The structural methods — [Pool.NewSeq], [Pool.Fork], [Pool.Append],
// [Pool.Truncate], [Pool.Free] — mutate pool state and, like [Pool.Stats],
// must be called from one goroutine at a time (the engine calls them between
// forward steps). During a forward step, any number of goroutines may call
// the accessors [Pool.WriteKV], [Pool.Seal],
// [Pool.ReadK], [Pool.ReadV], [Pool.KeyBlock], [Pool.KeyBlockF16],
// [Pool.KeySealed], [Pool.ValueBlock], [Pool.ValueBlockF16], [Pool.BlockID],
// [Pool.Owned], [Pool.Blocks] and
// [Seq.Len] concurrently: they only read pool and sequence metadata (Seal
// sets its block's flag), take no locks and allocate nothing. Goroutines
// may read any position of any sequence, and may write (WriteKV, Seal)
// only positions whose
// block is owned by that sequence alone (every position reserved by
// Append since the sequence was last forked, as parent or as child, is;
// [Pool.Owned] tells). A written position must not be read by another goroutine in the
// same step without synchronization; positions of distinct owned blocks are
// distinct memory, so writers of different sequences never race with each
// other or with readers of shared blocks, and sealers of different kv heads
// or layers of one block do not race either. No structural method
// may run concurrently with the accessors.
package kvcache
