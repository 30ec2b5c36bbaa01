package model_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

// logitsOf runs the tokens through a fresh cache on the CPU and returns
// the last row's logits.
func logitsOf(t *testing.T, m *model.Model, toks []int) []float32 {
	t.Helper()
	kv, err := m.NewCache(64, kvcache.DefaultBlockSize, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	r := cpu.NewRunner(m, cpu.NewCache(kv))
	seq := kv.NewSeq()
	rows := make([]model.Row, len(toks))
	for i, tok := range toks {
		rows[i] = model.Row{Seq: seq, Token: tok, NoLogits: i < len(toks)-1}
	}
	out, err := r.Forward(rows)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(out.Logits(len(toks) - 1))
}

// randomBlocks returns n elements of type typ as pseudo-random bytes, with
// each block's f16 scales (at the byte offsets scales) set to small finite
// values: every such block is valid, and the gguf package checks the
// decoding against ggml's.
func randomBlocks(typ gguf.Type, n int, scales ...int) []byte {
	b := make([]byte, n/typ.BlockSize()*typ.TypeSize())
	s := uint64(0x2545f4914f6cdd1d)
	for i := range b {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		b[i] = byte(s >> 24)
	}
	for i := 0; i < len(b); i += typ.TypeSize() {
		for _, o := range scales {
			// sign and mantissa from the random bytes, exponent 2^-9 to 2^-6
			h := binary.LittleEndian.Uint16(b[i+o:])&0x83ff | uint16(6+i%4)<<10
			binary.LittleEndian.PutUint16(b[i+o:], h)
		}
	}
	return b
}

// writeKQuantModel writes a small synthetic Q8_0 model whose dims are
// multiples of 256, with the tensors named in types stored as random
// blocks of those types instead.
func writeKQuantModel(t *testing.T, types map[string]gguf.Type) string {
	t.Helper()
	shape := synth.Shape{Name: "kq-test", Dim: 256, HiddenDim: 256, Layers: 1, Heads: 4, KVHeads: 4,
		Vocab: 300, ContextLen: 64, RopeTheta: 10000, NormEps: 1e-5}
	var buf bytes.Buffer
	if err := synth.WriteGGUF(&buf, shape, kernels.Q8_0, 5, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	scaleAt := map[gguf.Type][]int{gguf.Q2_K: {80, 82}, gguf.Q3_K: {108}, gguf.IQ4_NL: {0}, gguf.IQ4_XS: {0}, gguf.IQ2_XXS: {0}}
	var ts []gguf.WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		w := gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: f.TensorData(ti)}
		if typ, ok := types[ti.Name]; ok {
			w.Type, w.Data = typ, randomBlocks(typ, int(ti.Elements()), scaleAt[typ]...)
		}
		ts = append(ts, w)
	}
	var out bytes.Buffer
	if err := gguf.Write(&out, f.KV, ts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kq.gguf")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Q2_K, Q3_K, IQ4_NL and IQ4_XS matrices load as the file stores them and
// run re-quantized to Q8_0 on the CPU, whose rows match the file's values
// to within Q8_0's rounding.
func TestLoadKQuantTypes(t *testing.T) {
	types := map[string]gguf.Type{
		"blk.0.attn_q.weight": gguf.Q2_K, "blk.0.attn_k.weight": gguf.Q3_K,
		"blk.0.attn_v.weight": gguf.IQ4_NL, "blk.0.attn_output.weight": gguf.IQ4_XS,
	}
	path := writeKQuantModel(t, types)
	m, err := model.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, name := range []string{"Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS"} {
		if !slices.Contains(m.FileTypes(), name) {
			t.Errorf("file types %v lack %s", m.FileTypes(), name)
		}
	}
	if l := m.Weights.Layers[0]; l.Wq.Type != gguf.Q2_K || l.Wo.Type != gguf.IQ4_XS || l.W1.Type != gguf.Q8_0 {
		t.Errorf("the model's tensors are %v, %v, %v; want the file's Q2_K, IQ4_XS, Q8_0", l.Wq.Type, l.Wo.Type, l.W1.Type)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cw, err := cpu.WeightsOf(m)
	if err != nil {
		t.Fatal(err)
	}
	l := cw.Layers[0]
	for name, mat := range map[string]*kernels.Mat{
		"blk.0.attn_q.weight": l.Wq, "blk.0.attn_k.weight": l.Wk,
		"blk.0.attn_v.weight": l.Wv, "blk.0.attn_output.weight": l.Wo,
	} {
		if mat.Type != kernels.Q8_0 {
			t.Errorf("%s (%s) loaded as %v, want Q8_0", name, types[name], mat.Type)
			continue
		}
		ti, _ := f.Tensor(name)
		want := make([]float32, ti.Elements())
		if err := gguf.Dequantize(ti.Type, f.TensorData(ti), want); err != nil {
			t.Fatal(err)
		}
		cols := int(ti.Dims[0])
		got := make([]float32, cols)
		for r := range int(ti.Dims[1]) {
			mat.Row(got, r)
			w := want[r*cols : (r+1)*cols]
			for j := 0; j < cols; j += 32 { // Q8_0: at most half a step of max|x|/127 per block, plus f16 scale rounding
				var amax float32
				for _, v := range w[j : j+32] {
					amax = max(amax, float32(math.Abs(float64(v))))
				}
				for i := j; i < j+32; i++ {
					if d := math.Abs(float64(got[i] - w[i])); d > float64(amax)/127*0.51+1e-3*float64(amax) {
						t.Fatalf("%s (%s) row %d col %d: %v, file %v", name, types[name], r, i, got[i], w[i])
					}
				}
			}
		}
	}
	if lg := logitsOf(t, m, []int{1, 2, 3}); slices.ContainsFunc(lg, func(x float32) bool { return math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) }) {
		t.Error("non-finite logits")
	}
}

// The IQ types that need ggml's lattice tables are refused, naming the type
// and the types that load.
func TestLoadRefusesLatticeIQ(t *testing.T) {
	_, err := model.Load(writeKQuantModel(t, map[string]gguf.Type{"blk.0.ffn_up.weight": gguf.IQ2_XXS}), "")
	if err == nil {
		t.Fatal("an IQ2_XXS matrix loaded")
	}
	for _, want := range []string{"blk.0.ffn_up.weight", "IQ2_XXS is not supported", "Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
