package model_test

import (
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
)

// A step's logits rows stay as they were through the next Forward (the
// search keeps a row for Backspace without copying it), a failed Forward
// included; the one after may write over them.
func TestOutputLogitsOutliveNextForward(t *testing.T) {
	m := loadStories(t)
	kv, err := m.NewCache(64, 16, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	r := cpu.NewRunner(m, cpu.NewCache(kv))
	a, b := kv.NewSeq(), kv.NewSeq()
	out, err := r.Forward([]model.Row{{Seq: a, Token: 1}, {Seq: b, Token: 5}})
	if err != nil {
		t.Fatal(err)
	}
	rows := [][]float32{out.Logits(0), out.Logits(1)}
	want := [][]float32{slices.Clone(rows[0]), slices.Clone(rows[1])}
	// A failed step (a token outside the vocabulary) and a good one.
	if _, err := r.Forward([]model.Row{{Seq: a, Token: -1}}); err == nil {
		t.Fatal("a token of -1 ran")
	}
	for i := range 3 {
		if _, err := r.Forward([]model.Row{{Seq: a, Token: 2 + i}, {Seq: b, Token: 9 + i}}); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			break // past the promise
		}
		for j := range rows {
			if !slices.Equal(rows[j], want[j]) {
				t.Fatalf("row %d of the step before changed under the next Forward", j)
			}
		}
	}
}
