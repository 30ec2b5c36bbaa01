package ggml

// SetLazyRows turns the device's store of logits rows on or off (on by
// default on a GPU), for testing it on ggml's CPU device. Call it before
// the first Forward.
func SetLazyRows(b *Backend, on bool) {
	b.lazy = on
	b.dropGraph()
}

// SetSpanHook calls f for each attention group of each step from now on
// with its rows, its span's slots (padded), the slots its attention
// read and the slots of its blocks.
func SetSpanHook(b *Backend, f func(rows, span, read, used int)) { b.spans.hook = f }

// SetPadSlots sets the multiple the attention's slots are padded to (a
// GPU's 256), for testing a GPU's shapes on ggml's CPU device. Call it
// before the first Forward.
func SetPadSlots(b *Backend, n int) {
	b.padSlots = n
	b.dropGraph()
}
