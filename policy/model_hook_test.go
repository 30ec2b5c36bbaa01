package policy_test

import (
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// Hook the real stories260K forward pass into the calibration test: the
// shared llama2.c checkpoint, or the bundled GGUF (the same logits) when
// ../shared is absent.
func init() {
	stories260KForward = func(tb testing.TB, prompt string, steps int, next func(logits []float32) int) ([][]float32, error) {
		m, err := model.Load(modeltest.Stories260K(tb))
		if err != nil {
			return nil, err
		}
		defer m.Close()
		kv, err := m.NewCache(steps+1, 16, kvcache.F32)
		if err != nil {
			return nil, err
		}
		run := cpu.NewRunner(m, cpu.NewCache(kv))
		seq := kv.NewSeq()
		defer kv.Free(seq)
		toks := m.Tokenizer.Encode(prompt, true)
		var rows [][]float32
		for pos := 0; pos < steps; pos++ {
			out, err := run.Forward([]model.Row{{Seq: seq, Token: toks[pos]}})
			if err != nil {
				return nil, err
			}
			row := append([]float32(nil), out.Logits(0)...)
			rows = append(rows, row)
			if pos+1 >= len(toks) {
				toks = append(toks, next(row))
			}
		}
		return rows, nil
	}
}
