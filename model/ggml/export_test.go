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
// group per sequence, each reading as the backend chooses).
func SetAttention(b *Backend, way string) {
	b.gatherMode, b.splitRatio = gatherAuto, defaultSplitRatio
	switch way {
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

// Restarts is how many times the device's backend was restarted.
func Restarts(b *Backend) int { return b.restarts }
