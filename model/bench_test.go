package model_test

import (
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// BenchmarkStories260KGreedy256 decodes 256 greedy tokens after the
// prompt, one forward step each (the foundation issue's bar: well under a
// second).
//
//	go test ./model -run X -bench Greedy256
func BenchmarkStories260KGreedy256(b *testing.B) {
	m, err := model.Load(modeltest.Stories260K(b))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	kv, err := m.NewCache(512, 16, kvcache.F32)
	if err != nil {
		b.Fatal(err)
	}
	r := cpu.NewRunner(m, cpu.NewCache(kv))
	for b.Loop() {
		seq := kv.NewSeq()
		rows := make([]model.Row, len(prompt))
		for i, t := range prompt {
			rows[i] = model.Row{Seq: seq, Token: t, NoLogits: i < len(prompt)-1}
		}
		out, err := r.Forward(rows)
		if err != nil {
			b.Fatal(err)
		}
		for range 256 {
			next := argmax(out.Logits(len(out.Pos) - 1))
			if out, err = r.Forward([]model.Row{{Seq: seq, Token: next}}); err != nil {
				b.Fatal(err)
			}
		}
		kv.Free(seq)
	}
	b.ReportMetric(256*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}
