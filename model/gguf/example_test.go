package gguf_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/entropix-search/entropix-search/model/gguf"
)

func Example() {
	// Write a tiny model: two metadata keys and one 2x2 F32 matrix.
	var buf bytes.Buffer
	err := gguf.Write(&buf,
		[]gguf.KV{
			{Key: "general.architecture", Value: gguf.String("llama")},
			{Key: "llama.embedding_length", Value: gguf.Uint32(2)},
		},
		[]gguf.WriteTensor{{
			Name: "w", Dims: []uint64{2, 2}, Type: gguf.F32,
			Data: []byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64}, // 1 2 3 4
		}})
	if err != nil {
		log.Fatal(err)
	}

	// Read it back (gguf.Open does the same for a file, memory-mapped).
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	dim, _ := f.Uint("llama.embedding_length")
	fmt.Println(f.Architecture(), dim)
	w, _ := f.Tensor("w")
	vals := make([]float32, w.Elements())
	if err := gguf.Dequantize(w.Type, f.TensorData(w), vals); err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Name, w.Type, w.Dims, w.Offset, vals)
	// Output:
	// llama 2
	// w F32 [2 2] 160 [1 2 3 4]
}
