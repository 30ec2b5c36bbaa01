package ggml_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/modeltest/reftest"
)

// options returns the backend's options for the tests: the libraries of
// $ENTROPIX_GGML_DIR on ggml's CPU device (or $ENTROPIX_GGML_DEVICE),
// two threads; it skips the test when the libraries are not there.
func options(t testing.TB) ggml.Options {
	t.Helper()
	o := ggml.Options{Device: "cpu", Threads: 1, Dir: defaultLibDir()}
	if d := os.Getenv("ENTROPIX_GGML_DEVICE"); d != "" {
		o.Device = d
	}
	if err := ggml.Load(o); err != nil {
		if err == ggml.ErrNoLibrary {
			t.Skipf("skipped: %v", err)
		}
		t.Fatal(err)
	}
	return o
}

// defaultLibDir is where model/ggml/getlibs.sh puts the CPU libraries
// (.ggml/cpu in the repository) when ENTROPIX_GGML_DIR names none and
// they are there, else "".
func defaultLibDir() string {
	if os.Getenv("ENTROPIX_GGML_DIR") != "" {
		return ""
	}
	d := filepath.Join(modeltest.RepoRoot(), ".ggml", "cpu")
	if _, err := os.Stat(filepath.Join(d, "libggml-base.so")); err != nil {
		return ""
	}
	return d
}

// newBackend returns a ggml backend of m over a cache of tokens positions
// in blocks of bs, closed at the end of the test.
func newBackend(t testing.TB, m *model.Model, tokens, bs int, dt kvcache.ElemType) *ggml.Backend {
	t.Helper()
	b, err := ggml.New(m, model.CacheConfig{Tokens: tokens, BlockSize: bs, DType: dt}, options(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// spreadDiff is the largest difference between got and want relative to
// want's spread (reftest.SpreadDiff).
func spreadDiff(got, want []float32) float64 {
	d, _ := reftest.SpreadDiff(got, want)
	return d
}

// attentionWays are the ways of ggml.SetAttention.
var attentionWays = []string{"auto", "span", "gather", "split", "batch", "batch-split", "gpu", "gpu-batch", "flash", "gpu-noflash", "gpu-batch-noflash"}

// keepOutputs appends copies of the logits and of the attention (each of
// the step's nattn layers, in order) of out's rows that have logits.
func keepOutputs(out *model.Output, rows []model.Row, nattn int, logits [][]float32, att []model.Attention) ([][]float32, []model.Attention) {
	for i, r := range rows {
		if r.NoLogits {
			continue
		}
		logits = append(logits, slices.Clone(out.Logits(i)))
		for j := range nattn {
			a := out.Attention(i, j)
			a.Scores, a.Probs = slices.Clone(a.Scores), slices.Clone(a.Probs)
			att = append(att, a)
		}
	}
	return logits, att
}

// forked prefills a prompt of n positions (tokens 1..n, logits at the
// last) on b and forks it into k sequences, the prompt's first among
// them; it returns them and the prompt's rows, for reuse.
func forked(t testing.TB, b model.Backend, n, k int) ([]*kvcache.Seq, []model.Row) {
	t.Helper()
	p := b.Cache()
	root := p.NewSeq()
	var rows []model.Row
	for i := range n {
		rows = append(rows, model.Row{Seq: root, Token: i + 1, NoLogits: i < n-1})
	}
	if _, err := b.Forward(rows); err != nil {
		t.Fatal(err)
	}
	seqs := []*kvcache.Seq{root}
	for len(seqs) < k {
		seqs = append(seqs, p.Fork(root))
	}
	return seqs, rows
}
