// Package ggml is a backend of package model that runs the forward pass
// on a ggml device — a GPU through ggml's CUDA, Vulkan or Metal backend, or
// ggml's own CPU backend — behind the model.Backend seam. Importing it
// registers the backend as "ggml":
//
//	import _ "github.com/entropix-search/entropix-search/model/ggml"
//
// ggml is loaded at run time from the folder that Options.Dir or
// $ENTROPIX_GGML_DIR names (model/ggml/getlibs.sh fetches the pinned
// prebuilt libraries), through purego: no cgo, and a program that never
// asks for "ggml" needs nothing new. The binding is internal/ggml.
//
// # The device's state
//
// The weights are uploaded once, each in its file's type (weights.go is
// the one place that reads them: GGUF's types are ggml's), and a file's
// pages are given back once copied. The KV pool lives on the device: per layer a key tensor [KVDim,
// slots] and a value tensor, transposed [slots, KVDim] or, under flash
// attention, as the keys [KVDim, slots]; slot b*BlockSize+s holds
// position s of block b. The host's block manager
// (kvcache.Pool) stays the authority: its block tables say where each
// sequence's positions are, and the copies on write it decides are
// performed on the device, inside the next step's graph.
//
// # A step
//
// Each Forward (forward.go) is one graph for all rows of all sequences,
// planned on the host (plan.go: the groups, the masks, the slots written
// and copied) and built by graph.go:
// embedding, then per layer RMSNorm, q/k/v (Qwen2's biases), RoPE
// (interleaved pairs for llama, NeoX halves for qwen2), the copies on
// write and the new keys and values written into their slots with
// ggml_set_rows, attention by group — the rows whose sequences share
// blocks (one search's branches) attend together over their blocks'
// slots, each read once for all of them (a prefix shared by many
// branches is read once), with a mask from the block tables (0 where the
// row's sequence has the position, -Inf elsewhere), grouped-query heads
// by broadcast: two products and a softmax, or with Options.FlashAttn
// one ggml_flash_attn_ext, as llama.cpp runs it on a GPU (by default
// there: see Options.FlashAttn). A group's blocks are spread over the pool (forks, frees,
// other searches' blocks in between): when they lie close together it
// reads the slots from its lowest block id to its highest in place, else
// its blocks are gathered (ggml_get_rows, one for all such groups per
// layer) and it reads only those (plan.go's gatherSpan). Branches grown
// apart (16 samples of one prompt) share little: on the CPU, when a
// set's rows x blocks outweigh the blocks its rows see by more than 4
// times, it attends sequence by sequence instead. On a GPU, where a
// graph's every node is a kernel to record and launch, a step's groups
// attend as one batch (plan.go's planBatch: each group's blocks gathered
// and padded to the largest group's slots, its rows to the largest's; two
// products and a softmax, or one flash attention, a layer for any number
// of groups), and the
// step's rows, rows with logits and copies on write are padded (extra
// rows write to a scratch block past the pool's) so that the next steps
// have its shape and run its graph again; Wo, the
// residual, RMSNorm, SwiGLU, the residual; the classifier on the rows
// that want logits, and each logits row's statistics (stats.go: the
// argmax, the moments of the softmax's normalizer, the top K), which is
// what the search reads of a row most of the time. On a GPU the rows
// themselves stay on the device until read (lazy.go), and the layer
// whose attention a search asks for (entropix's attention metrics) hands
// out its sums, not its scores and probabilities (heads x positions a
// row): per head the entropy and Σ |score|, and the heads' disagreement
// (graph.go's attentionSums, model.AttentionSums). The graph's memory
// is reserved once for a typical step and grows only when a larger step
// comes; a step of the last step's shape runs the last graph again; the
// scheduler places any operation the device lacks on the CPU (a graph in
// more than one piece: GraphStats.MaxSplits).
package ggml
