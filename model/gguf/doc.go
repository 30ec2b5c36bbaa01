// Package gguf reads and writes GGUF files, the model format of ggml and
// llama.cpp.
//
// A GGUF file (versions 2 and 3; all fields little-endian) is laid out as
//
//	magic "GGUF", version uint32, tensor count uint64, metadata count uint64
//	metadata: key (uint64 length + bytes), value type uint32, value
//	tensor infos: name, n_dims uint32, dims uint64[n_dims], type uint32, offset uint64
//	padding to the alignment (general.alignment, default 32)
//	data section: tensor bytes, each at its offset from the section's start
//
// Metadata values are integers, floats, bools, strings or arrays of those;
// keys are dotted names such as "general.architecture" or
// "llama.embedding_length". A tensor's dims list the fastest-varying
// dimension first (dims[0] is the length of a row), and its type is a ggml
// element type: F32, F16, BF16, or a block quantization such as Q8_0 (32
// elements per 34-byte block) or Q4_K (256 elements per 144-byte block).
//
// Open memory-maps a file and Parse reads an image in memory; both check the
// whole structure first, so that TensorData can hand out slices of the image
// without further checks. Every count read from the file is bounded by the
// bytes that remain before anything is allocated from it, so a hostile or
// damaged file yields an error naming the field, never a panic or a huge
// allocation. Dequantize turns tensor data into float32s, and Write produces
// files that ggml-based engines load.
package gguf
