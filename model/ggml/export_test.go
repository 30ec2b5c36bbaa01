package ggml

// SetLazyRows turns the device's store of logits rows on or off (on by
// default on a GPU), for testing it on ggml's CPU device. Call it before
// the first Forward.
func SetLazyRows(b *Backend, on bool) {
	b.lazy = on
	b.dropGraph()
}

// SetSpanHook calls f with each attention group of each step from now
// on.
func SetSpanHook(b *Backend, f func(GroupSpan)) { b.spans.hook = f }

// SetPadSlots sets the multiple the attention's slots are padded to (a
// GPU's 256), for testing a GPU's shapes on ggml's CPU device. Call it
// before the first Forward.
func SetPadSlots(b *Backend, n int) {
	b.padSlots = n
	b.dropGraph()
}

// SetAttention sets how the attention groups read their blocks: "auto"
// (as the backend chooses), "span" (every group its span in place, no
// set of rows split), "gather" (every group its blocks gathered, no set
// split), "split" (every set of rows of several sequences split into a
// group per sequence, each reading as the backend chooses), "batch"
// (the groups as one batch, even one), "batch-split" (the sets split,
// as one batch), "groups" (one by one, even on a GPU), "gpu" (as on a
// GPU: the slots padded to 256, the logits rows lazy, no set split,
// flash attention), "gpu-batch" (the same, every step one batch),
// "gpu-noflash" and "gpu-batch-noflash" (the same without flash
// attention) and "flash" (as the backend chooses, with flash
// attention). Flash attention is off otherwise, and so are the
// attention's sums (SetAttentionSums). Call it before the first Forward.
func SetAttention(b *Backend, way string) {
	b.gatherMode, b.splitRatio, b.batchMode = gatherAuto, defaultSplitRatio, batchAuto
	b.sumAttn = false
	flash := false
	switch way {
	case "batch":
		b.batchMode = batchAlways
	case "batch-split":
		b.batchMode, b.splitRatio = batchAlways, 1e-9
	case "groups":
		b.batchMode = batchNever
	case "gpu", "gpu-noflash": // as on a GPU: slots padded, rows lazy, no set split, batches when the backend chooses
		b.padSlots, b.lazy, b.splitRatio, flash = 256, true, 0, way == "gpu"
	case "gpu-batch", "gpu-batch-noflash": // the same, every step one batch
		b.padSlots, b.lazy, b.splitRatio, b.batchMode, flash = 256, true, 0, batchAlways, way == "gpu-batch"
	case "flash":
		flash = true
	case "span":
		b.gatherMode, b.splitRatio = gatherNever, 0
	case "gather":
		b.gatherMode, b.splitRatio = gatherAlways, 0
	case "split":
		b.splitRatio = 1e-9
	case "auto":
	default:
		panic("SetAttention: no way " + way)
	}
	if err := b.setFlash(flash); err != nil {
		panic(err)
	}
	b.dropGraph()
}

// GraphMemory is the scheduler's compute buffer on the device, in bytes.
func GraphMemory(b *Backend) int { return b.sched.BufferSize(b.dev) }

// SetSplit sets the ratio of a set of rows' rows x blocks to the blocks
// its rows see beyond which it attends sequence by sequence (0: never).
func SetSplit(b *Backend, r float64) {
	b.splitRatio = r
	b.dropGraph()
}

// SetRestartOnFree turns on or off the restarts of the device's backend
// after device memory graphs ran on was freed (on by default on Vulkan),
// for testing them on ggml's CPU device.
func SetRestartOnFree(b *Backend, on bool) { b.restartOnFree = on }

// SetLavapipe says whether the device is taken for lavapipe (restarted
// before every graph under flash attention), to reproduce why it is.
func SetLavapipe(b *Backend, on bool) { b.lavapipe = on }

// Restarts is how many times the device's backend was restarted.
func Restarts(b *Backend) int { return b.restarts }

// setFlash turns flash attention on or off, the KV pool made again in
// its layout (cleared) when that changes: before the first Forward.
func (b *Backend) setFlash(on bool) error {
	if b.flash == on {
		return nil
	}
	b.dropGraph()
	b.kbuf.Free()
	b.kctx.Free()
	b.kbuf, b.kctx, b.flash = 0, 0, on
	return b.allocKV()
}

// DropGraph drops the last step's graph: the next step builds its own.
func DropGraph(b *Backend) { b.dropGraph() }

// SetAttentionSums turns on or off the attention's sums on the device in
// place of its scores and probabilities (on a GPU by default; SetAttention
// turns them off). Call it before the first Forward.
func SetAttentionSums(b *Backend, on bool) {
	b.sumAttn = on
	b.dropGraph()
}
