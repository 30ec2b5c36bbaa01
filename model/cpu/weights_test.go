package cpu_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

// The backends made on one model share one conversion of its weights;
// the tied output is the embedding's matrix; a closed model converts
// nothing, and no backend is made on it.
func TestBackendsShareWeights(t *testing.T) {
	shape := synth.Shapes["stories260K"]
	path := filepath.Join(t.TempDir(), "q8.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(f, shape, kernels.Q8_0, 2, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m, err := model.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	c := model.CacheConfig{Tokens: 64, DType: kvcache.F16}
	a, err := model.NewBackend("cpu", m, c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := model.NewBackend("cpu", m, c)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	w1, err := cpu.WeightsOf(m)
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := cpu.WeightsOf(m)
	if w1 != w2 || w1.Layers[0].Wq.Type != kernels.Q8_0 || (shape.Tied && w1.Output != w1.TokenEmbd) {
		t.Fatalf("two conversions, or %v weights", w1.Layers[0].Wq.Type)
	}
	// Both backends run, on the same weights.
	for _, be := range []model.Backend{a, b} {
		if _, err := be.Forward([]model.Row{{Seq: be.Cache().NewSeq(), Token: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cpu.WeightsOf(m); !errors.Is(err, model.ErrClosed) {
		t.Errorf("WeightsOf a closed model: %v", err)
	}
	if _, err := model.NewBackend("cpu", m, c); !errors.Is(err, model.ErrClosed) {
		t.Errorf("NewBackend on a closed model: %v", err)
	}
}
