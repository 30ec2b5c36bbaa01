package gguf

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

// FuzzParse checks that Parse never panics, that its errors carry the
// package prefix, and that whatever it accepts is self-consistent and
// survives a write/parse round trip.
func FuzzParse(f *testing.F) {
	small := writeImage(f, testKV(), testTensors())
	f.Add(small)
	for _, n := range []int{0, 4, 8, 24, 40, 100, len(small) / 2, len(small) - 1} {
		f.Add(small[:n])
	}
	f.Add(writeImage(f, []KV{{"general.alignment", Uint32(64)}, {"general.architecture", String("llama")}},
		[]WriteTensor{{"w", []uint64{32}, Q8_0, make([]byte, 34)}}))
	// One tensor of each type Dequantize added for K-quant and IQ4 files,
	// and one it refuses.
	f.Add(writeImage(f, testKV(), []WriteTensor{
		{"q2", []uint64{256}, Q2_K, encodeQ2K(ramp(256))}, {"q3", []uint64{256}, Q3_K, encodeQ3K(ramp(256))},
		{"nl", []uint64{32}, IQ4_NL, encodeIQ4NL(ramp(32))}, {"xs", []uint64{256}, IQ4_XS, encodeIQ4XS(ramp(256))},
		{"iq2", []uint64{256}, IQ2_XXS, make([]byte, 66)},
	}))
	if real, err := os.ReadFile(modeltest.Path(f, storiesGGUF)); err == nil {
		f.Add(real[:4096])
		f.Add(real[:14176]) // metadata and tensor infos, no data
	}

	f.Fuzz(checkParse)
}

// ramp returns n values from -1 to 1.
func ramp(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(2*i-n+1) / float32(n)
	}
	return x
}

func checkParse(t *testing.T, data []byte) {
	g, err := Parse(data)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "gguf: ") {
			t.Fatalf("error without prefix: %v", err)
		}
		return
	}
	for _, kv := range g.KV {
		_ = kv.Value.String()
		if v, ok := g.Lookup(kv.Key); !ok || !reflect.DeepEqual(v, kv.Value) {
			t.Fatalf("Lookup(%q) does not find its entry", kv.Key)
		}
	}
	for i := range g.Tensors {
		ti := &g.Tensors[i]
		if uint64(len(g.TensorData(ti))) != ti.Size || ti.Offset%g.Alignment != 0 ||
			ti.Elements()%uint64(ti.Type.BlockSize()) != 0 ||
			ti.Elements()/uint64(ti.Type.BlockSize())*uint64(ti.Type.TypeSize()) != ti.Size {
			t.Fatalf("tensor %q inconsistent: %+v", ti.Name, *ti)
		}
		if p, ok := g.Tensor(ti.Name); !ok || p != ti {
			t.Fatalf("Tensor(%q) does not find it", ti.Name)
		}
		if ti.Size <= 1<<16 {
			if out := make([]float32, ti.Elements()); Dequantize(ti.Type, g.TensorData(ti), out) != nil &&
				dequantizer(ti.Type) != nil {
				t.Fatalf("Dequantize of valid tensor %q fails", ti.Name)
			}
		}
	}
	// Not every valid file is writable (ggml limits names and wants
	// general.alignment as uint32), but what is written must read back
	// the same.
	if g.Alignment > 1<<12 {
		return // valid, but rewriting would pad to the huge alignment
	}
	var buf bytes.Buffer
	if Write(&buf, g.KV, toWrite(g)) != nil {
		return
	}
	h, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatalf("rewritten file does not parse: %v", err)
	}
	if !reflect.DeepEqual(h.KV, g.KV) || len(h.Tensors) != len(g.Tensors) {
		t.Fatal("rewritten metadata differs")
	}
	for i := range g.Tensors {
		a, b := &g.Tensors[i], &h.Tensors[i]
		if a.Name != b.Name || a.Type != b.Type || !reflect.DeepEqual(a.Dims, b.Dims) ||
			!bytes.Equal(g.TensorData(a), h.TensorData(b)) {
			t.Fatalf("rewritten tensor %q differs", a.Name)
		}
	}
}
