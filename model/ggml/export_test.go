package ggml

// SetLazyRows turns the device's store of logits rows on or off (on by
// default on a GPU), for testing it on ggml's CPU device. Call it before
// the first Forward.
func SetLazyRows(b *Backend, on bool) {
	b.lazy = on
	b.dropGraph()
}
