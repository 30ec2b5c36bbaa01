// Package synth builds Llama-shaped models with random weights, for
// benchmarks and tests that need the size of a real model but not its
// knowledge.
//
// A Shape names the dimensions of a known model (Shapes lists stories260K,
// stories15M, stories110M, smollm2-135m and llama3.2-1b). Generate fills a
// model of that shape with weights drawn from a seeded PCG generator, scaled
// as a freshly initialized network is (normal with standard deviation 0.02,
// the residual output projections shrunk by 1/sqrt(2*layers), norms of
// one), so that activations keep a sane range through every layer. The same
// shape, type and seed always give the same weights, whatever the number of
// threads used to draw them.
//
// WriteGGUF writes the same model as a GGUF v3 file of architecture
// "llama", with a SentencePiece vocabulary — the Llama 2 tokenizer's
// (ReadLlama2CVocab) or a synthetic one (SyntheticVocab) — so that other
// engines, llama.cpp among them, can run exactly the weights this module
// runs, and model.Load reads it back.
//
// Q8_0 models quantize every matrix whose rows are a multiple of 32 long;
// a matrix with other row lengths (stories260K's FFN down projection, 172
// wide) stays F32, as llama.cpp's quantizer falls back for such tensors.
package synth
