package kernels

// RoPE rotates one head's vector x in place by the angles whose cosines and
// sines are cos[i], sin[i] for pair i (len(cos) == len(x)/2).
//
// Interleaved layout (llama2.c, and llama-architecture GGUF files after
// llama.cpp's q/k row permutation is undone): pairs are (x[2i], x[2i+1]).
// Half layout (NeoX style, e.g. Qwen2): pairs are (x[i], x[i+len(x)/2]).
func RoPE(x, cos, sin []float32, interleaved bool) {
	half := len(cos)
	if rope(x[:2*half], cos, sin[:half], interleaved) {
		return
	}
	ropeGo(x, cos, sin, interleaved)
}

// ropeGo is RoPE in pure Go.
func ropeGo(x, cos, sin []float32, interleaved bool) {
	half := len(cos)
	if interleaved {
		for i := 0; i < half; i++ {
			x0, x1 := x[2*i], x[2*i+1]
			x[2*i] = x0*cos[i] - x1*sin[i]
			x[2*i+1] = x0*sin[i] + x1*cos[i]
		}
		return
	}
	lo, hi := x[:half], x[half:2*half]
	for i := 0; i < half; i++ {
		x0, x1 := lo[i], hi[i]
		lo[i] = x0*cos[i] - x1*sin[i]
		hi[i] = x0*sin[i] + x1*cos[i]
	}
}
