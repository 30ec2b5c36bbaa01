// Package cpu is the CPU backend of package model: the batched forward
// pass (Runner) and the key/value storage it reads (Cache), behind the
// model.Backend seam. Importing it registers the backend as "cpu":
//
//	import _ "github.com/entropix-search/entropix-search/model/cpu"
//
// The forward pass is batched from the start: one call advances any
// number of rows, each the next token of some sequence in the paged,
// copy-on-write KV cache (package kvcache manages its blocks; Cache stores
// them). Rows may belong to different sequences at different positions —
// the branches of a search tree, or the positions of one prompt during
// prefill — and every weight matrix is read once per call for all of them.
// A single sequence is simply a batch of one.
//
// The model's weights are tensors in their file's types (model.Tensor);
// the first backend made on a model converts them into the kernels'
// matrices (WeightsOf: which types run as stored, which re-quantized to
// Q8_0, a mapped file's pages given back as they are copied), and every
// later backend on the model shares that conversion.
//
// The files, by concern: runner.go is the step and the transformer block,
// phase by phase, with the residual adds named (model.Reference is the
// same computation one row at a time, the oracle the tests compare with);
// rows.go the per-row work between the products (residual add and norm,
// SwiGLU) and the products; plan.go the batch's attention plan (rows
// grouped by the cache blocks they share); attention.go the attention
// phases (cache write, sealing, scores and weighted values); cache.go the
// block storage and its layout. The numeric kernels are package kernels',
// the threads package workers' (internal/workers).
package cpu
