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
// references, and a block whose count reaches zero goes to a free list from
// which later allocations are served. Block storage is allocated lazily, one
// block at a time, up to the configured cap ([Config.MaxBlocks] or
// [Config.MaxBytes]); when the cap is reached and the free list is empty,
// [Pool.Append] reports [ErrCacheFull] and leaves the sequence unchanged, so
// the engine can prune branches and retry. Storage of freed blocks is kept
// for reuse, never returned to the runtime, until the Pool is dropped.
//
// # Copy on write of the last, partial block
//
// A decoding step writes only the position it appends, so the only block that
// can need a private copy is the last one of a sequence, and only while it is
// partially filled: [Pool.Append] into a full last block (or
// an empty sequence) takes a fresh block, and Append into a partial last block
// whose reference count is above one first copies that block (the positions
// already used) into a fresh block owned by the appending sequence. Full
// shared blocks are never copied. After a fork inside a block, the first of
// parent and child to append pays for one block copy; the other then owns the
// original block and copies nothing.
//
// Each block is one []float32 of Layers*2*BlockSize*KVDim floats laid out as
// [layer][K, V][slot][KVDim], so the keys (or values) of one layer in one
// block are a single contiguous slice ([Pool.KeyBlock], [Pool.ValueBlock])
// that attention can scan position-major.
//
// # Concurrency contract
//
// The structural methods — [Pool.NewSeq], [Pool.Fork], [Pool.Append],
// [Pool.Truncate], [Pool.Free] — mutate pool state and, like [Pool.Stats],
// must be called from one goroutine at a time (the engine calls them between
// forward steps). During a forward step, any number of goroutines may call
// the accessors [Pool.K], [Pool.V], [Pool.KeyBlock], [Pool.ValueBlock],
// [Pool.Owned], [Pool.Blocks] and [Seq.Len] concurrently: they only read pool
// and sequence metadata, take no locks and allocate nothing. Through the
// slices they return, goroutines may read any position of any sequence, and
// may write only positions whose block is owned by that sequence alone
// (every position reserved by Append since the sequence was last forked,
// as parent or as child, is; [Pool.Owned] tells). A
// written position must not be read by another goroutine in the same step
// without synchronization; positions of distinct owned blocks are distinct
// memory, so writers of different sequences never race with each other or
// with readers of shared blocks. No structural method may run concurrently
// with the accessors.
package kvcache
