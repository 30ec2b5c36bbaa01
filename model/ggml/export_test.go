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

// SetGather makes every attention group gather its blocks ("always"),
// read its span ("never"), or choose by their slots ("auto", the
// default).
func SetGather(b *Backend, mode string) {
	b.gatherMode = map[string]int{"auto": gatherAuto, "never": gatherNever, "always": gatherAlways}[mode]
	b.dropGraph()
}

// GraphMemory is the scheduler's compute buffer on the device, in bytes.
func GraphMemory(b *Backend) int { return b.sched.BufferSize(b.dev) }
