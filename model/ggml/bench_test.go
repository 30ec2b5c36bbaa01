package ggml_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
)

// BenchmarkDecode is one row's decoding step on arith (a tiny model: the
// step's fixed costs, graph building and scheduling, dominate), and the
// 16-branch step.
func BenchmarkDecode(b *testing.B) {
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	for _, branches := range []int{1, 16} {
		b.Run(map[int]string{1: "1row", 16: "16branches"}[branches], func(b *testing.B) {
			be := newBackend(b, m, 4096, 16, kvcache.F32)
			seqs, rows := forked(b, be, 40, branches)
			p := be.Cache()
			b.ResetTimer()
			for i := range b.N {
				rows = rows[:0]
				for j, s := range seqs {
					rows = append(rows, model.Row{Seq: s, Token: (i + j) % 700})
				}
				if _, err := be.Forward(rows); err != nil {
					b.Fatal(err)
				}
				if seqs[0].Len() > 200 {
					for _, s := range seqs {
						p.Truncate(s, 40)
					}
				}
			}
		})
	}
}

// BenchmarkPrefill is a prompt of 4000 positions prefilled in one step on
// a generated model of context 4096 (F16 cache), in one graph and in
// chunks of 512 and 128 rows; it reports the graph's memory.
func BenchmarkPrefill(b *testing.B) {
	o := options(b)
	sh := synth.Shape{Name: "long", Dim: 256, HiddenDim: 512, Layers: 2, Heads: 4, KVHeads: 2,
		Vocab: 512, ContextLen: 4096, RopeTheta: 10000, NormEps: 1e-5}
	m, err := synth.Generate(sh, kernels.F32, 3)
	if err != nil {
		b.Fatal(err)
	}
	for _, chunk := range []int{4096, 512, 128} {
		b.Run(fmt.Sprintf("chunk%d", chunk), func(b *testing.B) {
			o := o
			o.Chunk = chunk
			be, err := ggml.New(m, model.CacheConfig{Tokens: 4096, BlockSize: 16, DType: kvcache.F16}, o)
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			p := be.Cache()
			rows := make([]model.Row, 4000)
			for i := range b.N {
				s := p.NewSeq()
				for j := range rows {
					rows[j] = model.Row{Seq: s, Token: (7*j + i) % sh.Vocab, NoLogits: j < len(rows)-1}
				}
				if _, err := be.Forward(rows); err != nil {
					b.Fatal(err)
				}
				p.Free(s)
			}
			b.ReportMetric(float64(ggml.GraphMemory(be))/(1<<20), "graph-MiB")
		})
	}
}

// BenchmarkBuild is the host's cost of a step's graph when its shape is
// new (built, then allocated by ggml's scheduler): Llama-3.2-1B's 16
// layers at an eighth of its width (4 query heads and 1 key-value head of
// 64: the graph's nodes are the 1B's), shaped as on a GPU (gpu-batch), for
// one row and for 16 branches.
func BenchmarkBuild(b *testing.B) {
	o := options(b)
	sh := synth.Shape{Name: "1b-layers", Dim: 256, HiddenDim: 1024, Layers: 16, Heads: 4, KVHeads: 1,
		Vocab: 1024, ContextLen: 4096, RopeTheta: 500000, NormEps: 1e-5}
	m, err := synth.Generate(sh, kernels.Q8_0, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, branches := range []int{1, 16} {
		b.Run(map[int]string{1: "1row", 16: "16branches"}[branches], func(b *testing.B) {
			be, err := ggml.New(m, model.CacheConfig{Tokens: 4096, BlockSize: 16, DType: kvcache.F16}, o)
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			ggml.SetAttention(be, "gpu-batch")
			seqs, rows := forked(b, be, 64, branches)
			p := be.Cache()
			for i := range b.N {
				rows = rows[:0]
				for j, s := range seqs {
					rows = append(rows, model.Row{Seq: s, Token: (i + j) % sh.Vocab})
				}
				ggml.DropGraph(be)
				if _, err := be.Forward(rows); err != nil {
					b.Fatal(err)
				}
				if seqs[0].Len() > 200 {
					for _, s := range seqs {
						p.Truncate(s, 64)
					}
				}
			}
			g := be.GraphStats()
			b.ReportMetric(float64(g.BuildTime.Microseconds())/float64(g.Built), "build-µs")
			b.ReportMetric(float64(g.Nodes)/float64(g.Built+g.Reused), "nodes")
		})
	}
}
