// Package kernels holds the numeric inner loops of the forward pass: matrix
// products against F32, Q8_0, Q4_K, Q5_K, Q6_K and Q4_0 weights, RMSNorm,
// softmax, RoPE and the small vector helpers attention needs.
//
// The forward pass (package model) reads top to bottom and calls these; all
// the speed work lives here. Every kernel has a pure-Go version; faster
// versions may replace it at run time, and tests check that both agree.
//
// # Matrix products
//
// Decoding is memory-bound: a step reads every weight once, so Mat.MatMul
// takes a batch of n activation rows (the branches of a search tree, or a
// prompt's positions) and reuses each weight load for all of them. The
// amd64 micro-kernels compute a tile of weight rows times activation rows
// with the partial sums in vector registers (F32: 4 x up to 4; Q8_0: 32 x
// up to 6); a 16-row step costs a small multiple of a 1-row step instead
// of 16 times it. MatMulMany runs products of one input (a layer's q, k
// and v) as one job.
//
// F32 weights stay the caller's row-major slice. Q8_0 weights are unpacked
// into panels of 16 rows interleaved for VPDPBUSD (q8.go), and Q8_0
// products quantize the activations to int8 blocks first, as llama.cpp
// does, so that the inner loop is an int8 dot product (AVX-512 VNNI where
// available) with each vector lane summing its own weight row.
//
// The 4-, 5- and 6-bit GGUF types keep their bits: Q4_K, Q5_K, Q6_K and
// Q4_0 matrices are regrouped at load eight rows at a time (q4k.go,
// q5k.go, q6k.go, q40.go), so that one vector lane is one weight row: four
// activation quants (Q8_K: int8 blocks of 256 with their run sums)
// broadcast to all lanes meet four weights of eight rows in one
// VPMADDUBSW, the int16 results add up over a run before its scale, and
// the eight rows' sums come out in eight lanes. On AVX-512 VNNI two
// groups fill a ZMM register, sixteen rows, and one VPDPBUSD with the four
// quants broadcast from memory replaces the broadcast, VPMADDUBSW and
// VPADDW. (Q4_K and Q6_K matrices
// whose rows are not a multiple of 8 are used in the file's layout, one
// row at a time.)
//
// # Attention
//
// The CPU backend's KV cache (model/cpu) keeps each full block's keys transposed,
// one head's as HeadDim rows of BlockSize slots. ScoresT computes a query's
// scores against such a block as BlockSize-wide vector multiply-adds, one
// per dimension, with no horizontal sum per key; ScoresRows computes the
// same scores, bit for bit, from keys still stored as rows (the block being
// filled). ScoresTMulti and AxpyStridedMulti serve several queries per load
// of a block: the query heads of a GQA group, or the rows of a batch whose
// sequences share the block (the branches of a tree over their common
// prefix), so that a block is read once per step rather than once per
// branch; ScoresTBlocks serves one query's broadcasts to up to four blocks.
// All of them give a key's score with the same arithmetic, bit for bit.
// AxpyStrided does one head's weighted sum of cached values;
// DotStrided (one dot product per key) is the position-major scoring kernel
// kept for comparison. Softmax and SwiGLU use a vectorized exp.
//
// # Threads
//
// MatMul splits large products by weight rows across a persistent worker
// pool, package workers' (internal/workers; Pool here; the default is
// sized by GOMAXPROCS and changed with SetThreads). Parallel exposes the
// same pool to other loops, such as attention over rows and heads;
// ParallelTask takes a long-lived Task instead of a func literal and
// allocates nothing. The search borrows the pool from package workers
// directly, without importing the kernels.
//
// # Dispatch
//
// On amd64 the implementation is chosen at start-up from the CPU features
// (dispatch_amd64.go; Implementation reports the choice). The build tag
// purego, or any other architecture, selects the pure-Go kernels.
//
// The assembly is generated with avo by the command in asmgen/, a module
// of its own so that the main module does not depend on avo; run go
// generate in this directory after changing it.
package kernels

//go:generate go -C asmgen run . -set matmul -out ../matmul_amd64.s -stubs ../matmul_stubs_amd64.go -pkg kernels
//go:generate go -C asmgen run . -set vec -out ../vec_amd64.s -stubs ../vec_stubs_amd64.go -pkg kernels
//go:generate go -C asmgen run . -set gemm -out ../gemm_amd64.s -stubs ../gemm_stubs_amd64.go -pkg kernels
