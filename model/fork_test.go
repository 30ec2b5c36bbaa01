package model_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
)

// forkTol bounds how far a branch's logits may be from those of the same
// tokens run alone: zero, since every kernel sums in the same order whether
// a row's blocks are shared, batched or sealed.
const forkTol = 0

// forkAlone runs toks through m by itself, one token per Forward, in a
// fresh cache whose block size differs from the trees' so that the
// reference shares nothing with them, and returns every position's logits.
// The cache stores dt, as the tree's does.
func forkAlone(t *testing.T, m *model.Model, toks []int, dt kvcache.ElemType) [][]float32 {
	t.Helper()
	kv, err := m.NewCache(len(toks), 8, dt)
	if err != nil {
		t.Fatal(err)
	}
	r := cpu.NewRunner(m, cpu.NewCache(kv))
	seq := kv.NewSeq()
	out := make([][]float32, len(toks))
	for i, tok := range toks {
		o, err := r.Forward([]model.Row{{Seq: seq, Token: tok}})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = append([]float32(nil), o.Logits(0)...)
	}
	return out
}

// forkBranch is one sequence of a test tree: its tokens and the logits
// observed for some of its positions while the tree grew.
type forkBranch struct {
	name string
	seq  *kvcache.Seq
	toks []int
	obs  map[int][]float32
}

// check compares every observation of b with b's tokens run alone in a
// cache of dt.
func (b *forkBranch) check(t *testing.T, m *model.Model, dt kvcache.ElemType) {
	t.Helper()
	if len(b.obs) == 0 {
		return
	}
	ref := forkAlone(t, m, b.toks, dt)
	for pos, got := range b.obs {
		if d := forkMaxDiff(got, ref[pos]); !(d <= forkTol) {
			t.Errorf("branch %s (%d tokens): position %d: logits differ from the sequence run alone by %g", b.name, len(b.toks), pos, d)
		}
	}
}

func forkMaxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// forkTree grows a random tree over m: a prompt prefilled in one batch,
// then steps in which branches fork (at their end, or truncated back to a
// random earlier point, often inside a partly filled block), forks of forks
// included, some branches are freed, and every live branch advances in one
// Forward — one row each, sometimes two. Every row's logits are checked
// against its branch's tokens run alone. The cache stores dt.
func forkTree(t *testing.T, m *model.Model, dt kvcache.ElemType, blockSize int, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	vocab := m.Config.Vocab
	kv, err := m.NewCache(4096, blockSize, dt)
	if err != nil {
		t.Fatal(err)
	}
	r := cpu.NewRunner(m, cpu.NewCache(kv))

	root := &forkBranch{name: "root", seq: kv.NewSeq(), obs: map[int][]float32{}}
	prompt := 5 + rng.IntN(3*blockSize)
	rows := make([]model.Row, prompt)
	for i := range rows {
		tok := rng.IntN(vocab)
		root.toks = append(root.toks, tok)
		rows[i] = model.Row{Seq: root.seq, Token: tok, NoLogits: i < prompt-1}
	}
	out, err := r.Forward(rows)
	if err != nil {
		t.Fatal(err)
	}
	root.obs[prompt-1] = append([]float32(nil), out.Logits(prompt-1)...)

	all := []*forkBranch{root}
	live := []*forkBranch{root}
	fork := func(p *forkBranch) {
		b := &forkBranch{name: fmt.Sprintf("%s.%d", p.name, len(all)), seq: kv.Fork(p.seq), obs: map[int][]float32{}}
		b.toks = append([]int(nil), p.toks...)
		if rng.IntN(2) == 0 { // fork at an earlier point
			n := 1 + rng.IntN(len(b.toks))
			if err := kv.Truncate(b.seq, n); err != nil {
				t.Fatal(err)
			}
			b.toks = b.toks[:n]
		}
		all = append(all, b)
		live = append(live, b)
	}
	for range 3 {
		fork(root)
	}

	type rowOf struct {
		b   *forkBranch
		pos int
	}
	var owners []rowOf
	for step := range steps {
		for range rng.IntN(3) {
			if len(live) < 10 {
				fork(live[rng.IntN(len(live))])
			}
		}
		if len(live) > 3 && rng.IntN(4) == 0 {
			i := rng.IntN(len(live))
			kv.Free(live[i].seq)
			live = append(live[:i], live[i+1:]...)
		}
		rows, owners = rows[:0], owners[:0]
		for _, i := range rng.Perm(len(live)) {
			b := live[i]
			for range 1 + rng.IntN(4)/3 { // a second row now and then
				tok := rng.IntN(vocab)
				owners = append(owners, rowOf{b, len(b.toks)})
				b.toks = append(b.toks, tok)
				rows = append(rows, model.Row{Seq: b.seq, Token: tok, NoLogits: rng.IntN(8) == 0})
			}
		}
		out, err := r.Forward(rows)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for i, o := range owners {
			if out.Pos[i] != o.pos {
				t.Fatalf("step %d: row %d of branch %s written at %d, want %d", step, i, o.b.name, out.Pos[i], o.pos)
			}
			if l := out.Logits(i); l != nil {
				o.b.obs[o.pos] = append([]float32(nil), l...)
			}
		}
	}
	st := kv.Stats()
	if st.CopyOnWrites == 0 || st.Forks == 0 {
		t.Errorf("tree made %d forks and %d copies on write; the test should exercise both", st.Forks, st.CopyOnWrites)
	}
	for _, b := range all {
		b.check(t, m, dt)
	}
	for _, b := range live {
		kv.Free(b.seq)
	}
	if st := kv.Stats(); st.BlocksInUse != 0 {
		t.Errorf("%d blocks in use after freeing every branch", st.BlocksInUse)
	}
}

// forkModels returns the models the fork tests run on: synthetic
// stories260K-shape models in F32 and Q8_0, and the real stories260K (the
// shared llama2.c checkpoint, or the bundled GGUF without ../shared).
func forkModels(t *testing.T) map[string]*model.Model {
	t.Helper()
	ms := map[string]*model.Model{}
	for _, dt := range []kernels.DType{kernels.F32, kernels.Q8_0} {
		m, err := synth.Generate(synth.Shapes["stories260K"], dt, 3)
		if err != nil {
			t.Fatal(err)
		}
		ms["synth-stories260K-"+dt.String()] = m
	}
	path, tok := modeltest.Stories260K(t)
	ms[filepath.Base(path)] = load(t, path, tok)
	return ms
}

// kvTypes are the cache element types the fork tests cover.
var kvTypes = []kvcache.ElemType{kvcache.F32, kvcache.F16}

func TestForkTreeMatchesAlone(t *testing.T) {
	for name, m := range forkModels(t) {
		for _, dt := range kvTypes {
			for _, bs := range []int{4, 16} {
				for seed := range uint64(3) {
					t.Run(fmt.Sprintf("%s/kv-%v/block%d/seed%d", name, dt, bs, seed), func(t *testing.T) {
						forkTree(t, m, dt, bs, seed, 24)
					})
				}
			}
		}
	}
}

// TestForkTreeStories15M runs the tree on a model of real width (288,
// head dim 48, 32000 tokens; two of the six layers, to keep it quick),
// where the matrix kernels take their tiled and threaded paths.
func TestForkTreeStories15M(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the 15M-parameter tree takes a few seconds")
	}
	for _, dt := range []kernels.DType{kernels.F32, kernels.Q8_0} {
		shape := synth.Shapes["stories15M"]
		shape.Layers = 2
		m, err := synth.Generate(shape, dt, 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, kt := range kvTypes {
			t.Run(fmt.Sprintf("%v/kv-%v", dt, kt), func(t *testing.T) { forkTree(t, m, kt, 4, 11, 10) })
		}
	}
}

// TestForkSharedPrefill prefills a prompt once, forks it into branches that
// share every block of the prompt, and advances them together: each branch
// matches its tokens run alone, and the prompt is stored once.
func TestForkSharedPrefill(t *testing.T) {
	for name, m := range forkModels(t) {
		for _, dt := range kvTypes {
			t.Run(fmt.Sprintf("%s/kv-%v", name, dt), func(t *testing.T) {
				const bs, prompt, branches, steps = 4, 10, 6, 5 // the prompt ends inside a block
				rng := rand.New(rand.NewPCG(1, 2))
				kv, err := m.NewCache(1024, bs, dt)
				if err != nil {
					t.Fatal(err)
				}
				r := cpu.NewRunner(m, cpu.NewCache(kv))
				root := kv.NewSeq()
				var toks []int
				rows := make([]model.Row, prompt)
				for i := range rows {
					toks = append(toks, rng.IntN(m.Config.Vocab))
					rows[i] = model.Row{Seq: root, Token: toks[i], NoLogits: i < prompt-1}
				}
				out, err := r.Forward(rows)
				if err != nil {
					t.Fatal(err)
				}
				first := append([]float32(nil), out.Logits(prompt-1)...)
				bs0 := make([]*forkBranch, branches)
				for i := range bs0 {
					bs0[i] = &forkBranch{name: fmt.Sprint(i), seq: kv.Fork(root), toks: append([]int(nil), toks...),
						obs: map[int][]float32{prompt - 1: first}}
				}
				kv.Free(root)
				blocks := (prompt + bs - 1) / bs
				if st := kv.Stats(); st.BlocksInUse != blocks || st.LogicalBlocks != branches*blocks || st.Appends != prompt {
					t.Fatalf("after prefill and forks: %+v; want %d blocks in use, %d logical, %d appends", st, blocks, branches*blocks, prompt)
				}
				for step := range steps {
					rows = rows[:0]
					for _, b := range bs0 {
						tok := rng.IntN(m.Config.Vocab)
						b.toks = append(b.toks, tok)
						rows = append(rows, model.Row{Seq: b.seq, Token: tok})
					}
					out, err := r.Forward(rows)
					if err != nil {
						t.Fatal(err)
					}
					for i, b := range bs0 {
						b.obs[prompt+step] = append([]float32(nil), out.Logits(i)...)
					}
				}
				// The full blocks of the prompt are still shared by all.
				if st := kv.Stats(); st.SharedBlocks != prompt/bs {
					t.Errorf("%d shared blocks, want the prompt's %d full blocks", st.SharedBlocks, prompt/bs)
				}
				for _, b := range bs0 {
					b.check(t, m, dt)
				}
			})
		}
	}
}

// TestDefaultKVType: f16 for quantized weights, f32 for float ones; "auto"
// resolves to it and other names parse as kvcache types.
func TestDefaultKVType(t *testing.T) {
	for dt, want := range map[kernels.DType]kvcache.ElemType{kernels.F32: kvcache.F32, kernels.Q8_0: kvcache.F16} {
		m, err := synth.Generate(synth.Shapes["stories260K"], dt, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.DefaultKVType(); got != want {
			t.Errorf("%v weights: DefaultKVType %v, want %v", dt, got, want)
		}
		for name, w := range map[string]kvcache.ElemType{"auto": want, "AUTO": want, "f32": kvcache.F32, "f16": kvcache.F16} {
			if got, err := m.KVType(name); err != nil || got != w {
				t.Errorf("%v weights: KVType(%q) = %v, %v; want %v", dt, name, got, err, w)
			}
		}
		if _, err := m.KVType("q4"); err == nil {
			t.Errorf("KVType(q4) accepted")
		}
	}
	if _, auto, err := model.ParseKVType("Auto"); !auto || err != nil {
		t.Errorf("ParseKVType(Auto) = auto %v, %v", auto, err)
	}
	if _, _, err := model.ParseKVType("q4"); err == nil || !strings.Contains(err.Error(), "auto") {
		t.Errorf("ParseKVType(q4): %v, want an error naming auto", err)
	}
}
