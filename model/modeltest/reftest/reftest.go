// Package reftest is the comparison with the reference forward pass that
// every backend's tests run: a prompt goes through the backend as a
// prefill (every position's logits kept) and then one token at a time,
// and the logits at every position are compared with model.Reference's,
// relative to the reference row's spread (its largest minus its smallest
// logit). Each backend's test lists its cases (models, tolerances) and
// makes its backend; the prompt, the steps and the comparison are here,
// written once.
//
// It is a package of its own, not part of modeltest: it imports model,
// whose own dependencies' tests import modeltest.
package reftest

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
)

// Small is a synthetic shape whose rows are whole Q4_K super-blocks
// (256), with grouped-query attention and an untied classifier.
var Small = synth.Shape{Name: "small", Dim: 256, HiddenDim: 512, Layers: 2, Heads: 4, KVHeads: 2,
	Vocab: 512, ContextLen: 64, RopeTheta: 10000, NormEps: 1e-5}

// Case is one model of the comparison.
type Case struct {
	// Name names the subtests; a name starting with "synth" marks a
	// generated model: it runs with the F32 cache only (the file models
	// check the F16 cache), and under -short only when Short is set.
	Name  string
	Model func(t *testing.T) *model.Model
	Tol   float64 // the largest logit difference allowed, relative to the reference's logit spread
	Short bool    // a generated model's case that -short (the race run) keeps
}

// Load returns a Case.Model loading the GGUF file at path, closed at the
// end of the test.
func Load(path string) func(t *testing.T) *model.Model {
	return func(t *testing.T) *model.Model {
		m, err := model.Load(path, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
}

// Bundled returns a Case.Model loading the model file name of the
// repository's bench/models.
func Bundled(name string) func(t *testing.T) *model.Model {
	return Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", name))
}

// Shared returns a Case.Model loading ../shared/models/task-models/name,
// skipping the test when ../shared is absent.
func Shared(name string) func(t *testing.T) *model.Model {
	return func(t *testing.T) *model.Model {
		d := modeltest.SharedDir()
		if d == "" {
			t.Skip("skipped: ../shared is absent")
		}
		return Load(filepath.Join(d, "models", "task-models", name))(t)
	}
}

// Generate returns a Case.Model generating Small with weights of type dt
// (seed 3), turned by variant when it is not nil.
func Generate(dt kernels.DType, variant func(*model.Model) *model.Model) func(t *testing.T) *model.Model {
	return func(t *testing.T) *model.Model {
		m, err := synth.Generate(Small, dt, 3)
		if err != nil {
			t.Fatal(err)
		}
		if variant != nil {
			m = variant(m)
		}
		return m
	}
}

// Prefill and Decode are the comparison's steps: a prefill of Prefill
// positions, then Decode positions one at a time.
const (
	Prefill = 24
	Decode  = 16
)

// Run runs every case in both cache types as subtests "NAME/kv-TYPE":
// newBackend makes the backend under test over a cache of cfg (64
// positions in blocks of 4, so that the prompt spans several blocks),
// and the logits at every position must be within the case's tolerance
// of the reference's (at least 0.002 with the F16 cache: keys and values
// rounded to 11 bits). check, when not nil, then checks the backend
// further (what it reports of itself).
func Run(t *testing.T, cases []Case, newBackend func(t *testing.T, m *model.Model, cfg model.CacheConfig) model.Backend,
	check func(t *testing.T, b model.Backend)) {
	for _, c := range cases {
		for _, dt := range []kvcache.ElemType{kvcache.F32, kvcache.F16} {
			synthetic := strings.HasPrefix(c.Name, "synth")
			if synthetic && dt == kvcache.F16 {
				continue // the file models check the F16 cache
			}
			if synthetic && testing.Short() && !c.Short {
				continue // -short (the race run) keeps the cases the reference is quick for
			}
			t.Run(fmt.Sprintf("%s/kv-%v", c.Name, dt), func(t *testing.T) {
				m := c.Model(t)
				tol := c.Tol
				if dt == kvcache.F16 {
					tol = max(tol, 0.002)
				}
				b := newBackend(t, m, model.CacheConfig{Tokens: 64, BlockSize: 4, DType: dt})
				worst := Compare(t, m, b, tol)
				t.Logf("largest difference %.2g of the logit spread (tolerance %g)", worst, tol)
				if check != nil {
					check(t, b)
				}
			})
		}
	}
}

// Prompt is the comparison's prompt for a vocabulary of vocab tokens:
// Prefill+Decode tokens spread over it.
func Prompt(vocab int) []int {
	p := make([]int, Prefill+Decode)
	for i := range p {
		p[i] = (7*i*i + 3*i + 1) % vocab
	}
	return p
}

// Compare runs Prompt through a new sequence of b, the first Prefill
// positions in one step and the others one step each, fails t when a
// position's logits are further than tol (relative to the spread) from
// m.Reference's, and returns the largest difference.
func Compare(t *testing.T, m *model.Model, b model.Backend, tol float64) float64 {
	t.Helper()
	prompt := Prompt(m.Config.Vocab)
	want, err := m.Reference(prompt)
	if err != nil {
		t.Fatal(err)
	}
	seq := b.Cache().NewSeq()
	var rows []model.Row
	for _, tok := range prompt[:Prefill] {
		rows = append(rows, model.Row{Seq: seq, Token: tok})
	}
	var got [][]float32
	out, err := b.Forward(rows)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		got = append(got, append([]float32(nil), out.Logits(i)...))
	}
	for _, tok := range prompt[Prefill:] {
		out, err := b.Forward([]model.Row{{Seq: seq, Token: tok}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, append([]float32(nil), out.Logits(0)...))
	}
	worst := 0.0
	for pos := range want {
		d, j := SpreadDiff(got[pos], want[pos])
		if !(d <= tol) {
			t.Fatalf("position %d, token %d: %g, reference %g (%.3g of the spread, tolerance %g)", pos, j, got[pos][j], want[pos][j], d, tol)
		}
		worst = max(worst, d)
	}
	return worst
}

// SpreadDiff is the largest difference between got and want relative to
// want's spread (its largest minus its smallest value), and where it is
// (a NaN counts as the largest).
func SpreadDiff(got, want []float32) (float64, int) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, f := range want {
		lo, hi = min(lo, float64(f)), max(hi, float64(f))
	}
	worst, at := 0.0, 0
	for j, f := range want {
		d := math.Abs(float64(got[j])-float64(f)) / (hi - lo)
		if !(d <= worst) {
			worst, at = d, j
			if math.IsNaN(d) {
				return d, j
			}
		}
	}
	return worst, at
}
