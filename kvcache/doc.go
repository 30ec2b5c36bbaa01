// Package kvcache is the block manager of a paged, copy-on-write key/value
// cache for transformer attention, in the spirit of vLLM's.
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
// handed out lazily, one block id at a time, up to the configured cap
// ([Config.MaxBlocks] or [Config.MaxBytes]); when the cap is reached and
// the free list is empty, [Pool.Append] reports [ErrCacheFull] and leaves
// the sequence unchanged, so the engine can prune branches and retry. A
// backend keeps the storage of freed blocks for reuse.
//
// # Blocks to copy
//
// The pool holds no keys or values: a backend (the CPU's, package
// model/cpu) stores them by block id, and the pool tells it what to copy.
// A decoding step writes only the position it appends, so the only block
// that can need a private copy is the last one of a sequence, and only
// while it is partially filled: [Pool.Append] into a full last block (or
// an empty sequence) takes a fresh block, and Append into a partial last
// block whose reference count is above one takes a fresh block in its
// place and queues a [Copy] of the positions already used, which the
// backend takes ([Pool.TakeCopies]) and performs before it writes, as
// vLLM's block manager hands its workers the blocks to copy. Full shared
// blocks are never copied. After a fork inside a block, the first of
// parent and child to append pays for one block copy; the other then owns
// the original block and copies nothing. [Pool.BlocksToAppend] tells how
// many blocks appends will take, so that a caller can make room first.
//
// # Stale data
//
// Nothing clears storage. A position reserved by [Pool.Append] holds
// unspecified data until the backend writes it: whatever the block's
// earlier owner left there (a reused block), or what a position that
// [Pool.Truncate] gave back held; it may be NaN. Likewise the slots of a
// block past its sequence's length. Nothing needs zeros: a forward pass
// writes a step's positions before any of its rows attends, and attends
// only over positions it has written. Zeroing released blocks, as the
// pool once did so that a new position read as zero, took about a
// quarter of the search's own time outside the forward pass: a search
// releases its pruned branches' blocks between two forward passes, on the
// critical path.
//
// # Concurrency contract
//
// The structural methods — [Pool.NewSeq], [Pool.Fork], [Pool.Append],
// [Pool.Truncate], [Pool.Free], [Pool.TakeCopies] — mutate pool state
// and, like [Pool.Stats], must be called from one goroutine at a time (the
// engine and the backend call them between forward steps). During a
// forward step, any number of goroutines may call the readers
// [Pool.BlockID], [Pool.Blocks], [Pool.Owned] and [Seq.Len]: they only
// read metadata, take no locks and allocate nothing. A backend writes only
// positions whose block is owned by their sequence alone (every position
// reserved by Append since the sequence was last forked, as parent or as
// child, is; [Pool.Owned] tells), so writers of different sequences never
// race with each other or with readers of shared blocks.
package kvcache
