package model_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
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

// A lazy step's rows are fetched on first use, once each, into the place
// a filled row would have; LogitsLater fetches only when called, and keeps
// giving its step's row after the next Prepare (the rows' lifetime);
// statistics are there only when the backend wrote them.
func TestOutputLazyLogitsAndStats(t *testing.T) {
	const vocab = 5
	rows := []model.Row{{Token: 1}, {Token: 2, NoLogits: true}, {Token: 3}}
	var o model.Output
	fetched := map[[2]int]int{} // (step, row) -> fetches
	step := 0
	prepare := func(lazy, stats bool) {
		step++
		s := step
		o.Pos = []int{0, 1, 2}
		o.Prepare(rows, vocab, 0, nil)
		if stats {
			buf := o.StatsBuffer(2)
			for i := range buf {
				st := &buf[i]
				st.Max, st.Arg = float32(10*s+i), i
				st.Top[0], st.TopLogits[0] = int32(i), st.Max
				if len(st.Top) != 2 || len(st.TopLogits) != 2 {
					t.Fatalf("top of %d and %d, want 2", len(st.Top), len(st.TopLogits))
				}
			}
		}
		if lazy {
			o.FetchLogits(func(i int, dst []float32) {
				fetched[[2]int{s, i}]++
				for j := range dst {
					dst[j] = float32(100*s + 10*i + j)
				}
			})
			return
		}
		buf := o.LogitsBuffer()
		for j := range buf {
			buf[j] = -float32(j)
		}
	}

	prepare(true, true)
	if len(fetched) != 0 {
		t.Fatalf("fetched %v before any read", fetched)
	}
	if st := o.Stats(0); st == nil || st.Max != 10 || st.Arg != 0 || st.Top[0] != 0 {
		t.Fatalf("stats of row 0: %+v", st)
	}
	if st := o.Stats(2); st == nil || st.Max != 11 || st.Arg != 1 || st.Top[0] != 1 {
		t.Fatalf("stats of row 2: %+v", st)
	}
	if o.Stats(1) != nil || o.Logits(1) != nil {
		t.Fatal("a NoLogits row has statistics or logits")
	}
	later := o.LogitsLater(2)
	if got := o.Logits(0); got[0] != 100 || got[4] != 104 {
		t.Fatalf("row 0: %v", got)
	}
	o.Logits(0)
	if fetched[[2]int{1, 0}] != 1 || len(fetched) != 1 {
		t.Fatalf("fetches %v, want row 0 once", fetched)
	}
	prepare(false, false) // the next step: filled rows, no statistics
	if o.Stats(0) != nil {
		t.Fatal("statistics outlived their step")
	}
	if got := o.Logits(2); got[0] != -5 {
		t.Fatalf("filled row 2: %v", got)
	}
	if got := later(); got[0] != 110 || fetched[[2]int{1, 1}] != 1 {
		t.Fatalf("LogitsLater after the next step: %v (fetches %v)", got, fetched)
	}
	later()
	if len(fetched) != 2 {
		t.Fatalf("fetches %v", fetched)
	}

	// Readers on several goroutines fetch each row once.
	prepare(true, false)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.Logits(0)
			o.Logits(2)
		}()
	}
	wg.Wait()
	if fetched[[2]int{3, 0}] != 1 || fetched[[2]int{3, 1}] != 1 {
		t.Fatalf("concurrent reads fetched %v", fetched)
	}
}

// RowStatsOf gives what its definition says: the largest two (NaN
// skipped, the first on ties), the sums over the finite terms, the top k
// in order (ties: the lower token first), and a flag for NaN or +Inf.
func TestRowStatsOf(t *testing.T) {
	ninf := float32(math.Inf(-1))
	rng := rand.New(rand.NewPCG(1, 2))
	var st model.RowStats
	for trial := range 300 {
		n := 1 + rng.IntN(300)
		row := make([]float32, n)
		for i := range row {
			row[i] = float32(rng.IntN(40)) / 4 // many ties
			if rng.IntN(10) == 0 {
				row[i] = ninf
			}
		}
		if trial%7 == 0 {
			for i := range row {
				row[i] = ninf
			}
		}
		k := 1 + rng.IntN(12)
		model.RowStatsOf(row, k, &st)
		if st.NonFinite {
			t.Fatalf("trial %d: a finite row flagged", trial)
		}
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return row[order[a]] > row[order[b]] })
		wantSecond := ninf
		if n > 1 {
			wantSecond = row[order[1]]
		}
		if st.Max != row[order[0]] || st.Arg != order[0] || st.Second != wantSecond {
			t.Fatalf("trial %d: max %v at %d, second %v; want %v at %d, %v", trial, st.Max, st.Arg, st.Second, row[order[0]], order[0], wantSecond)
		}
		var z, a, b float64
		if !math.IsInf(float64(st.Max), -1) {
			for _, l := range row {
				if s := float64(l) - float64(st.Max); !math.IsInf(s, -1) {
					z, a, b = z+math.Exp(s), a+math.Exp(s)*s, b+math.Exp(s)*s*s
				}
			}
		}
		if math.Abs(st.Z-z) > 1e-12*z || math.Abs(st.A-a) > 1e-12*(1+math.Abs(a)) || math.Abs(st.B-b) > 1e-12*(1+b) {
			t.Fatalf("trial %d: sums %v %v %v, want %v %v %v", trial, st.Z, st.A, st.B, z, a, b)
		}
		if len(st.Top) != min(k, n) || len(st.TopLogits) != len(st.Top) {
			t.Fatalf("trial %d: top of %d, want %d", trial, len(st.Top), min(k, n))
		}
		for i, tok := range st.Top {
			if int(tok) != order[i] || st.TopLogits[i] != row[order[i]] {
				t.Fatalf("trial %d: top %v %v, want the first of %v", trial, st.Top, st.TopLogits, order)
			}
		}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		model.RowStatsOf([]float32{1, bad, 2}, 2, &st)
		if !st.NonFinite {
			t.Errorf("a row holding %v is not flagged", bad)
		}
	}
}

// TestOutputAttentionSums: a backend that sums the attention where it
// computes hands over 2*Heads+1 floats per row with logits and layer, read
// back per row; the next Prepare drops them.
func TestOutputAttentionSums(t *testing.T) {
	const vocab, heads, layers = 5, 2, 2
	rows := []model.Row{{Token: 1}, {Token: 2, NoLogits: true}, {Token: 3}}
	var o model.Output
	o.Pos = []int{3, 4, 5}
	o.Prepare(rows, vocab, heads, nil)
	buf := o.AttentionSumsBuffer(layers)
	if len(buf) != 2*layers*(2*heads+1) {
		t.Fatalf("%d floats, want %d", len(buf), 2*layers*(2*heads+1))
	}
	for i := range buf {
		buf[i] = float32(i)
	}
	for _, c := range []struct{ row, layer, first int }{{0, 0, 0}, {0, 1, 5}, {2, 0, 10}, {2, 1, 15}} {
		a, ok := o.AttentionSums(c.row, c.layer)
		f := float32(c.first)
		if !ok || a.Heads != heads || a.Len != o.Pos[c.row]+1 || a.Entropy[0] != f || a.Entropy[1] != f+1 ||
			a.AbsScores[0] != f+2 || a.AbsScores[1] != f+3 || a.Disagreement != f+4 {
			t.Fatalf("row %d, layer %d: %+v %v", c.row, c.layer, a, ok)
		}
		if at := o.Attention(c.row, c.layer); at.Heads != 0 {
			t.Fatalf("row %d: attention rows as well as sums", c.row)
		}
	}
	if _, ok := o.AttentionSums(1, 0); ok {
		t.Fatal("sums for a row without logits")
	}
	if _, ok := o.AttentionSums(0, layers); ok {
		t.Fatal("sums for a layer not asked for")
	}
	o.Prepare(rows, vocab, heads, nil)
	if _, ok := o.AttentionSums(0, 0); ok {
		t.Fatal("the last step's sums after Prepare")
	}
}
