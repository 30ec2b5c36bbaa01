package ggml_test

import (
	"path/filepath"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
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
			p := be.Cache()
			root := p.NewSeq()
			var rows []model.Row
			for i := range 40 {
				rows = append(rows, model.Row{Seq: root, Token: i + 1, NoLogits: i < 39})
			}
			if _, err := be.Forward(rows); err != nil {
				b.Fatal(err)
			}
			seqs := []*kvcache.Seq{root}
			for len(seqs) < branches {
				seqs = append(seqs, p.Fork(root))
			}
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
