package synth_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// logits runs toks through m one at a time and returns every position's
// logits.
func logits(t *testing.T, m *model.Model, toks []int) [][]float32 {
	t.Helper()
	kv, err := m.NewCache(len(toks), 4, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	r := cpu.NewRunner(m, cpu.NewCache(kv))
	seq := kv.NewSeq()
	var all [][]float32
	for _, tok := range toks {
		out, err := r.Forward([]model.Row{{Seq: seq, Token: tok}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, append([]float32(nil), out.Logits(0)...))
	}
	return all
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func TestShapes(t *testing.T) {
	for _, name := range synth.Names() {
		s := synth.Shapes[name]
		if s.Name != name {
			t.Errorf("Shapes[%q].Name = %q", name, s.Name)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Parameter counts of the real models (tied embeddings).
	for name, want := range map[string]int64{"stories15M": 15_191_712, "stories110M": 109_529_856, "smollm2-135m": 134_515_008, "llama3.2-1b": 1_235_814_400} {
		if got := synth.Shapes[name].Params(); got != want {
			t.Errorf("%s: %d params, want %d", name, got, want)
		}
	}
	if _, err := synth.Lookup("nope"); err == nil {
		t.Error("Lookup of an unknown shape succeeded")
	}
}

func TestGenerateDeterministic(t *testing.T) {
	s := synth.Shapes["stories260K"]
	toks := []int{1, 300, 7, 511, 42}
	for _, dt := range []kernels.DType{kernels.F32, kernels.Q8_0} {
		a, err := synth.Generate(s, dt, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := synth.Generate(s, dt, 1)
		c, _ := synth.Generate(s, dt, 2)
		la, lb, lc := logits(t, a, toks), logits(t, b, toks), logits(t, c, toks)
		for i := range la {
			if d := maxAbsDiff(la[i], lb[i]); d != 0 {
				t.Errorf("%v: same seed, position %d: logits differ by %g", dt, i, d)
			}
			for _, v := range la[i] {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || math.Abs(float64(v)) > 20 {
					t.Fatalf("%v: position %d: logit %v is not sane", dt, i, v)
				}
			}
		}
		if d := maxAbsDiff(la[4], lc[4]); d == 0 {
			t.Errorf("%v: seeds 1 and 2 give the same logits", dt)
		}
		if want := map[kernels.DType]gguf.Type{kernels.F32: gguf.F32, kernels.Q8_0: gguf.Q8_0}[dt]; a.Weights.Layers[0].W2.Type != gguf.F32 || a.Weights.Layers[0].W1.Type != want {
			t.Errorf("%v: W1 is %v and W2 (172 wide) %v", dt, a.Weights.Layers[0].W1.Type, a.Weights.Layers[0].W2.Type)
		}
	}
}

func TestGenerateBad(t *testing.T) {
	s := synth.Shapes["stories260K"]
	if _, err := synth.Generate(s, kernels.DType(9), 1); err == nil {
		t.Error("unknown dtype accepted")
	}
	s.Heads = 7
	if _, err := synth.Generate(s, kernels.F32, 1); err == nil {
		t.Error("dim 64 with 7 heads accepted")
	}
	s = synth.Shapes["stories260K"]
	s.Vocab = 100
	if _, err := synth.Generate(s, kernels.F32, 1); err == nil {
		t.Error("vocabulary of 100 accepted")
	}
	if err := synth.WriteGGUF(new(bytes.Buffer), synth.Shapes["stories260K"], kernels.F32, 1, &tokenizer.Vocab{Tokens: []string{"a"}}); err == nil {
		t.Error("WriteGGUF with a 1-token vocabulary for 512 succeeded")
	}
}

// writeLoad writes shape's GGUF to a temporary file and loads it.
func writeLoad(t *testing.T, s synth.Shape, dt kernels.DType, vocab *tokenizer.Vocab) (*model.Model, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), s.Name+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(f, s, dt, 7, vocab); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, path
}

func TestWriteGGUFLoadsBack(t *testing.T) {
	s := synth.Shapes["stories260K"]
	toks := []int{1, 400, 3, 259, 100, 511, 2}
	for _, dt := range []kernels.DType{kernels.F32, kernels.Q8_0} {
		want, err := synth.Generate(s, dt, 7)
		if err != nil {
			t.Fatal(err)
		}
		got, path := writeLoad(t, s, dt, nil)
		if got.Config.Dim != s.Dim || got.Config.KVHeads != s.KVHeads || !got.Config.Tied || got.Config.RopeTheta != s.RopeTheta {
			t.Errorf("%v: loaded config %+v", dt, got.Config)
		}
		if wc, gc := want.Config, got.Config; wc.Layers != gc.Layers || wc.Vocab != gc.Vocab || wc.NormEps != gc.NormEps ||
			wc.RopeInterleaved != gc.RopeInterleaved || wc.ContextLen != gc.ContextLen || wc.HeadDim != gc.HeadDim {
			t.Errorf("%v: config %+v, generated %+v", dt, gc, wc)
		}
		lw, lg := logits(t, want, toks), logits(t, got, toks)
		for i := range lw {
			if d := maxAbsDiff(lw[i], lg[i]); d != 0 {
				t.Errorf("%v: position %d: loaded logits differ by %g", dt, i, d)
			}
		}
		// The tokenizer round-trips text through byte pieces.
		ids := got.Tokenizer.Encode("Hi, Zoë!", true)
		if s := got.Tokenizer.Decode(ids[1:]); s != "Hi, Zoë!" {
			t.Errorf("%v: tokenizer round trip gave %q (ids %v)", dt, s, ids)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if ft, _ := f.Uint("general.file_type"); (dt == kernels.Q8_0) != (ft == 7) {
			t.Errorf("%v: general.file_type %d", dt, ft)
		}
		ti, _ := f.Tensor("blk.0.attn_q.weight")
		if want := map[kernels.DType]gguf.Type{kernels.F32: gguf.F32, kernels.Q8_0: gguf.Q8_0}[dt]; ti.Type != want {
			t.Errorf("%v: attn_q stored as %v", dt, ti.Type)
		}
		if _, ok := f.Tensor("output.weight"); ok {
			t.Errorf("%v: tied model has output.weight", dt)
		}
		f.Close()
	}
}

func TestWriteGGUFLlama2Vocab(t *testing.T) {
	vocab, err := synth.ReadLlama2CVocab(modeltest.Path(t, modeltest.Llama2Tokenizer), 32000)
	if err != nil {
		t.Fatal(err)
	}
	if vocab.Tokens[1] != "<s>" || vocab.Tokens[3] != "<0x00>" || vocab.Tokens[259] != "▁▁" || vocab.Tokens[260] != "▁t" {
		t.Fatalf("pieces %q", vocab.Tokens[:5])
	}
	s := synth.Shapes["stories15M"]
	s.Layers = 1 // the vocabulary is what is tested; keep the file small
	m, _ := writeLoad(t, s, kernels.Q8_0, vocab)
	ids := m.Tokenizer.Encode("Once upon a time", true)
	if want := []int{1, 9038, 2501, 263, 931}; !equalInts(ids, want) {
		t.Errorf("Encode = %v, want %v (Llama 2)", ids, want)
	}
	if _, err := synth.ReadLlama2CVocab(modeltest.Path(t, modeltest.Llama2Tokenizer), 512); err == nil {
		t.Error("32000-piece file read as 512")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSyntheticVocab(t *testing.T) {
	for _, n := range []int{259, 512, 49152} {
		v, err := synth.SyntheticVocab(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Tokens) != n {
			t.Fatalf("%d tokens, want %d", len(v.Tokens), n)
		}
		if _, err := tokenizer.New(*v); err != nil {
			t.Errorf("n=%d: %v", n, err)
		}
	}
	if _, err := synth.SyntheticVocab(258); err == nil {
		t.Error("258 tokens accepted")
	}
}

func BenchmarkGenerate(b *testing.B) {
	for _, name := range []string{"stories15M", "stories110M"} {
		for _, dt := range []kernels.DType{kernels.F32, kernels.Q8_0} {
			b.Run(name+"/"+dt.String(), func(b *testing.B) {
				for b.Loop() {
					if _, err := synth.Generate(synth.Shapes[name], dt, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestQ8CloseToF32 checks that the Q8_0 model of a seed computes nearly
// what the F32 model of the same seed does: quantization moves the logits
// by a small fraction of their spread, and the top token rarely changes.
func TestQ8CloseToF32(t *testing.T) {
	s := synth.Shapes["stories15M"]
	s.Layers = 2
	f, err := synth.Generate(s, kernels.F32, 4)
	if err != nil {
		t.Fatal(err)
	}
	q, err := synth.Generate(s, kernels.Q8_0, 4)
	if err != nil {
		t.Fatal(err)
	}
	toks := []int{1, 450, 17, 31999, 2000, 8, 12345, 99}
	lf, lq := logits(t, f, toks), logits(t, q, toks)
	for i := range lf {
		var mean, sq, dsq float64
		for j, v := range lf[i] {
			mean += float64(v)
			sq += float64(v) * float64(v)
			d := float64(v - lq[i][j])
			dsq += d * d
		}
		n := float64(len(lf[i]))
		std := math.Sqrt(sq/n - (mean/n)*(mean/n))
		rms, worst := math.Sqrt(dsq/n), maxAbsDiff(lf[i], lq[i])
		if rms > 0.03*std || worst > 0.15*std {
			t.Errorf("position %d: Q8_0 logits differ from F32 by %g (rms) and %g (max); logit std %g", i, rms, worst, std)
		}
	}
}

// moreBits follows llama.cpp's Q4_K_M: Q6_K for the output, or for the
// token embeddings where the output is tied to them, and for attn_v and
// ffn_down in layers 0, 1, 4, 7, 10, 13, 14, 15 of 16.
func TestMoreBits(t *testing.T) {
	var got []int
	for l := range 16 {
		if synth.MoreBits(fmt.Sprintf("blk.%d.ffn_down.weight", l), 16, false) {
			got = append(got, l)
		}
		if synth.MoreBits(fmt.Sprintf("blk.%d.ffn_up.weight", l), 16, false) {
			t.Errorf("ffn_up of layer %d", l)
		}
	}
	if fmt.Sprint(got) != "[0 1 4 7 10 13 14 15]" {
		t.Errorf("ffn_down in layers %v", got)
	}
	if !synth.MoreBits("output.weight", 16, false) || synth.MoreBits("token_embd.weight", 16, false) || !synth.MoreBits("token_embd.weight", 16, true) {
		t.Error("output or tied token embeddings")
	}
}
