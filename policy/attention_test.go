package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// attentionExample is the reference document's 2 heads x 4 positions.
func attentionExample() Attention {
	scores := []float32{0, 0, 0, 0,
		float32(math.Log(.5)), float32(math.Log(.25)), float32(math.Log(.125)), float32(math.Log(.125))}
	probs := []float32{.25, .25, .25, .25, .5, .25, .125, .125}
	return Attention{Heads: 2, Len: 4, Scores: scores, Probs: probs}
}

func randomAttention(r *rand.Rand, heads, n int) Attention {
	a := Attention{Heads: heads, Len: n, Scores: make([]float32, heads*n), Probs: make([]float32, heads*n)}
	for h := range heads {
		row := a.Scores[h*n : (h+1)*n]
		var z float64
		for j := range row {
			row[j] = float32(r.NormFloat64() * 2)
			z += math.Exp(float64(row[j]))
		}
		for j := range row {
			a.Probs[h*n+j] = float32(math.Exp(float64(row[j])) / z)
		}
	}
	return a
}

func TestAttentionExample(t *testing.T) {
	full := attentionExample()
	want := AttentionMetrics{Entropy: 1.875, Varentropy: 0.015625, Agreement: 0.0625, Interaction: 0.7797906}
	variants := map[string]Attention{
		"scores+probs": full,
		"scores only":  {Heads: 2, Len: 4, Scores: full.Scores},
		"probs only":   {Heads: 2, Len: 4, Probs: full.Probs},
	}
	for name, a := range variants {
		got, err := MeasureAttention(a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w := want
		if a.Scores == nil {
			w.Interaction = 0
		}
		if !near(got.Entropy, w.Entropy, 1e-6) || !near(got.Varentropy, w.Varentropy, 1e-6) ||
			!near(got.Agreement, w.Agreement, 1e-6) || !near(got.Interaction, w.Interaction, 1e-6) {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
	// Mean over layers: the same layer twice gives the same metrics.
	got, err := MeasureAttention(full, full)
	if err != nil || !near(got.Entropy, 1.875, 1e-6) {
		t.Errorf("two layers: %+v, %v", got, err)
	}
}

// TestAttentionOwnPositions: the metrics look at Len positions only, so the
// empty slots of a preallocated cache (bug 1 of the reference) cannot leak
// in, whatever they hold.
func TestAttentionOwnPositions(t *testing.T) {
	a := attentionExample()
	const slots = 4096
	scores := make([]float32, 2*slots) // cache rows: 4 real positions, then empty
	for h := range 2 {
		copy(scores[h*slots:], a.Scores[h*4:(h+1)*4])
	}
	// The engine passes the live prefix of each head, repacked head-major.
	live := Attention{Heads: 2, Len: 4, Scores: make([]float32, 8)}
	for h := range 2 {
		copy(live.Scores[h*4:], scores[h*slots:h*slots+4])
	}
	got, err := MeasureAttention(live)
	if err != nil || !near(got.Entropy, 1.875, 1e-6) {
		t.Fatalf("live prefix: %+v, %v", got, err)
	}
	padded, _ := MeasureAttention(Attention{Heads: 2, Len: slots, Scores: scores})
	if padded.Entropy < 10 {
		t.Errorf("padded entropy %v: expected the reference's ~12-bit artefact", padded.Entropy)
	}
}

func TestAttentionValidate(t *testing.T) {
	bad := []Attention{
		{},
		{Heads: 2, Len: 4},
		{Heads: 2, Len: 4, Scores: make([]float32, 7)},
		{Heads: 2, Len: 4, Probs: make([]float32, 9)},
		{Heads: MaxHeads + 1, Len: 1, Scores: make([]float32, MaxHeads+1)},
		{Heads: 1 << 20, Len: 1 << 20},
		{Heads: 2, Len: -1, Scores: []float32{}},
	}
	for _, a := range bad {
		if _, err := MeasureAttention(a); err == nil {
			t.Errorf("%d heads x %d: no error", a.Heads, a.Len)
		}
	}
	nan := Attention{Heads: 1, Len: 2, Scores: []float32{0, float32(math.NaN())}}
	if _, err := MeasureAttention(nan); err == nil {
		t.Error("NaN scores: no error")
	}
	if m, err := MeasureAttention(); err != nil || m != (AttentionMetrics{}) {
		t.Errorf("no layers: %+v, %v", m, err)
	}
}

func TestAttentionScoresMatchProbs(t *testing.T) {
	a := randomAttention(rand.New(rand.NewPCG(9, 9)), 8, 300)
	both, _ := MeasureAttention(a)
	sc, _ := MeasureAttention(Attention{Heads: a.Heads, Len: a.Len, Scores: a.Scores})
	if !near(both.Entropy, sc.Entropy, 1e-5) || !near(both.Agreement, sc.Agreement, 1e-6) ||
		!near(both.Varentropy, sc.Varentropy, 1e-5) {
		t.Errorf("probs path %+v, scores path %+v", both, sc)
	}
}

// sumsOf sums a's attention as a GPU backend does (model.AttentionSums).
func sumsOf(a Attention) AttentionSums {
	H, L := a.Heads, a.Len
	s := AttentionSums{Heads: H, Len: L, Entropy: make([]float32, H), AbsScores: make([]float32, H)}
	for h := range H {
		for j := range L {
			p := float64(a.Probs[h*L+j])
			if p > 0 {
				s.Entropy[h] -= float32(p * math.Log(p))
			}
			s.AbsScores[h] += float32(math.Abs(float64(a.Scores[h*L+j])))
		}
	}
	for j := range L {
		var mu float64
		for h := range H {
			mu += float64(a.Probs[h*L+j]) / float64(H)
		}
		for h := range H {
			s.Disagreement += float32(math.Abs(float64(a.Probs[h*L+j]) - mu))
		}
	}
	return s
}

func TestAttentionSums(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, shape := range [][2]int{{1, 1}, {2, 4}, {8, 300}, {32, 1000}} {
		a := randomAttention(r, shape[0], shape[1])
		want, err := MeasureAttention(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := MeasureAttentionSums(sumsOf(a))
		if err != nil {
			t.Fatal(err)
		}
		if !near(got.Entropy, want.Entropy, 1e-5) || !near(got.Varentropy, want.Varentropy, 1e-5) ||
			!near(got.Agreement, want.Agreement, 1e-6) || !near(got.Interaction, want.Interaction, 1e-5) {
			t.Errorf("%v: from the sums %+v, from the attention %+v", shape, got, want)
		}
		two, _ := MeasureAttentionSums(sumsOf(a), sumsOf(a))
		if two != got {
			t.Errorf("%v: two layers alike %+v, one %+v", shape, two, got)
		}
	}
	for _, bad := range []AttentionSums{{}, {Heads: 2, Len: 3, Entropy: make([]float32, 1), AbsScores: make([]float32, 2)},
		{Heads: 1, Len: 1, Entropy: []float32{float32(math.NaN())}, AbsScores: []float32{0}}} {
		if _, err := MeasureAttentionSums(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func BenchmarkAttention(b *testing.B) {
	for _, shape := range [][2]int{{8, 256}, {32, 1024}, {32, 4096}} {
		a := randomAttention(rand.New(rand.NewPCG(1, 1)), shape[0], shape[1])
		b.Run(fmt.Sprintf("heads=%d/len=%d", shape[0], shape[1]), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				MeasureAttention(a)
			}
		})
	}
}
