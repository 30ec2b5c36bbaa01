package gguf

import (
	"encoding/binary"
	"math"
	"os"
	"testing"
)

// TestDequantizeGGMLReference decodes blocks whose float32s ggml itself
// produced and wants them bit for bit. testdata/ggml_dequant.bin (see
// testdata/ggml_dequant.md for how it was made) is a run of records, all
// little-endian: type uint32, element count n uint32, the n elements'
// blocks, then ggml's n float32s from dequantize_row_<type>. Each record's
// first half is ggml's own quantization of a smooth signal, its second half
// random bytes with a random finite f16 scale, so that every bit of the
// scale packing is exercised.
//
// The products involved are exact in float32 (an 11-bit f16 mantissa times
// small integers) except IQ4_XS's last one, which rounds once in both
// implementations, so the results must be identical.
func TestDequantizeGGMLReference(t *testing.T) {
	data, err := os.ReadFile("testdata/ggml_dequant.bin")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Type]bool{}
	for len(data) > 0 {
		if len(data) < 8 {
			t.Fatalf("%d trailing bytes", len(data))
		}
		typ, n := Type(binary.LittleEndian.Uint32(data)), int(binary.LittleEndian.Uint32(data[4:]))
		raw := n / typ.BlockSize() * typ.TypeSize()
		if typ.BlockSize() == 0 || n%typ.BlockSize() != 0 || len(data) < 8+raw+4*n {
			t.Fatalf("bad record: %s, %d elements, %d bytes left", typ, n, len(data))
		}
		blocks, want := data[8:8+raw], data[8+raw:8+raw+4*n]
		data = data[8+raw+4*n:]
		seen[typ] = true
		got := deq(t, typ, blocks, n)
		bad := 0
		for i, g := range got {
			w := binary.LittleEndian.Uint32(want[4*i:])
			if math.Float32bits(g) != w {
				if bad++; bad <= 5 {
					t.Errorf("%s element %d (block %d) = %v, ggml %v", typ, i, i/typ.BlockSize(), g, math.Float32frombits(w))
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d elements differ from ggml", typ, bad, n)
		}
	}
	for _, typ := range []Type{Q2_K, Q3_K, IQ4_NL, IQ4_XS} {
		if !seen[typ] {
			t.Errorf("no reference record for %s", typ)
		}
	}
}
