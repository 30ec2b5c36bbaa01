package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func probsOf(c *Candidates, vocab int) []float64 {
	ps := c.Probs(nil)
	out := make([]float64, vocab)
	for i, it := range c.Items {
		out[it.ID] = ps[i]
	}
	return out
}

func TestTopPDoneRight(t *testing.T) {
	var c Candidates
	c.Reset(logs(.3, .25, .2, .15, .1))
	c.KeepTopP(0.5)
	got := probsOf(&c, 5)
	want := []float64{.545455, .454545, 0, 0, 0}
	for i := range want {
		if !near(got[i], want[i], 1e-6) {
			t.Fatalf("top-p 0.5 of [.3 .25 .2 .15 .1] = %.6f, want %.6f", got, want)
		}
	}
	// Same set whatever the input order (unsorted path) and when sorted.
	c.Reset(logs(.1, .2, .3, .15, .25))
	c.KeepTopP(0.5)
	if ids := ids(&c); !slices.Equal(ids, []int{2, 4}) {
		t.Errorf("shuffled: kept %v, want [2 4]", ids)
	}
	c.Reset(logs(.3, .25, .2, .15, .1))
	c.KeepTopK(5)
	c.KeepTopK(4) // sorts
	c.KeepTopP(0.5)
	if ids := ids(&c); !slices.Equal(ids, []int{0, 1}) {
		t.Errorf("sorted: kept %v, want [0 1]", ids)
	}
}

func ids(c *Candidates) []int {
	out := make([]int, len(c.Items))
	for i, it := range c.Items {
		out[i] = int(it.ID)
	}
	slices.Sort(out)
	return out
}

// refTopP is the sort-based definition: the smallest prefix of the
// descending order whose mass reaches p.
func refTopP(logits []float32, p float64) int {
	var c Candidates
	c.Reset(logits)
	ps := c.Probs(nil)
	slices.SortFunc(ps, func(a, b float64) int { return -cmpF(a, b) })
	var cum float64
	for i, x := range ps {
		cum += x
		if cum >= p {
			return i + 1
		}
	}
	return len(ps)
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestTopPKeepsHead: over random rows the kept set is exactly the head of
// the distribution, as large as the sort-based definition says.
func TestTopPKeepsHead(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 300 {
		n := []int{3, 40, 1000, 20000}[i%4]
		logits := randomLogits(r, n)
		if i%5 == 0 { // heavy ties
			for j := range logits {
				logits[j] = float32(r.IntN(4))
			}
		}
		p := r.Float64()
		var c Candidates
		c.Reset(logits)
		c.KeepTopP(p)
		want := refTopP(logits, p)
		if c.Len() < want-1 || c.Len() > want+1 { // ±1: rounding when the mass hits p exactly
			t.Fatalf("case %d n=%d p=%v: kept %d, want %d", i, n, p, c.Len(), want)
		}
		// Every kept logit >= every dropped logit.
		kept := map[int32]bool{}
		minKept := float32(math.Inf(1))
		for _, it := range c.Items {
			kept[it.ID] = true
			minKept = min(minKept, it.Logit)
		}
		for j, l := range logits {
			if !kept[int32(j)] && l > minKept {
				t.Fatalf("case %d: dropped token %d (logit %v) above a kept one (%v)", i, j, l, minKept)
			}
		}
	}
}

func TestMinPFilters(t *testing.T) {
	var c Candidates
	c.Reset(logs(.5, .2, .1, .04, .01))
	c.KeepMinP(0.1) // cut at .05
	if got := ids(&c); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("min-p 0.1 kept %v, want [0 1 2]", got)
	}
	c.Reset(logs(.5, .2, .1, .04, .01))
	c.KeepMinP(0)
	if c.Len() != 5 {
		t.Errorf("min-p 0 kept %d", c.Len())
	}
	c.KeepMinP(1)
	if got := ids(&c); !slices.Equal(got, []int{0}) {
		t.Errorf("min-p 1 kept %v", got)
	}
	// After temperature the cut applies to the tempered distribution.
	c.Reset(logs(.5, .2, .1, .04, .01))
	c.Scale(2) // p ∝ sqrt: .04 -> ratio sqrt(.08) = .28
	c.KeepMinP(0.25)
	if got := ids(&c); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("min-p 0.25 at T=2 kept %v, want [0 1 2 3]", got)
	}
}

func TestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for i := range 100 {
		n := 1 + r.IntN(5000)
		logits := randomLogits(r, n)
		if i%4 == 0 {
			for j := range logits {
				logits[j] = float32(r.IntN(3))
			}
		}
		k := 1 + r.IntN(60)
		var c Candidates
		c.Reset(logits)
		c.KeepTopK(k)
		sorted := slices.Clone(logits)
		slices.SortFunc(sorted, func(a, b float32) int { return cmpF(float64(b), float64(a)) })
		want := min(k, n)
		if c.Len() != want {
			t.Fatalf("n=%d k=%d: kept %d", n, k, c.Len())
		}
		if k >= n {
			continue // no-op
		}
		for j, it := range c.Items {
			if it.Logit != sorted[j] {
				t.Fatalf("n=%d k=%d: item %d logit %v, want %v (sorted head)", n, k, j, it.Logit, sorted[j])
			}
		}
	}
}

func TestTemperatureZeroIsGreedy(t *testing.T) {
	var c Candidates
	c.Reset([]float32{1, 5, 3})
	c.Scale(0)
	if c.Len() != 1 || c.Items[0].ID != 1 {
		t.Errorf("T=0 kept %+v", c.Items)
	}
}

// TestDrawChiSquare: draws from a fixed seed follow the distribution.
func TestDrawChiSquare(t *testing.T) {
	probs := []float64{.4, .25, .15, .1, .05, .03, .015, .005}
	logits := logs(probs...)
	const n = 200000
	counts := make([]int, len(probs))
	var c Candidates
	c.Reset(logits)
	rng := NewRNG(42, 0)
	for range n {
		tok := c.Draw(&rng)
		counts[tok]++
	}
	var chi2 float64
	for i, p := range probs {
		e := p * n
		d := float64(counts[i]) - e
		chi2 += d * d / e
	}
	// 7 degrees of freedom: P(chi2 > 24.32) = 0.001.
	if chi2 > 24.32 {
		t.Errorf("chi-square %.2f > 24.32 (df 7, p=0.001); counts %v", chi2, counts)
	}
	// Bug 4 of the reference favoured the top token; here its share matches.
	if share := float64(counts[0]) / n; !near(share, .4, 0.005) {
		t.Errorf("top token share %.4f, want .4", share)
	}
}

func TestDrawDeterministic(t *testing.T) {
	logits := randomLogits(rand.New(rand.NewPCG(1, 1)), 1000)
	seq := func(seed uint64) []int {
		ch := NewChain(Temperature(1.2), TopK(50), TopP(.95), MinP(.01), NewDist(seed, 0))
		var c Candidates
		out := make([]int, 50)
		for i := range out {
			out[i] = ch.Sample(&c, logits)
		}
		return out
	}
	a, b, other := seq(7), seq(7), seq(8)
	if !slices.Equal(a, b) {
		t.Error("same seed, different draws")
	}
	if slices.Equal(a, other) {
		t.Error("different seeds, same 50 draws")
	}
	// The generator advances: 50 draws are not all the same token.
	if slices.Min(a) == slices.Max(a) {
		t.Errorf("generator does not advance: %v", a)
	}
}

// TestCloneIndependent: a cloned sampler's state is independent of its
// parent's, in both directions.
func TestCloneIndependent(t *testing.T) {
	logits := make([]float32, 16) // uniform: draws only depend on the generator
	pen := &Penalties{Window: 8, Presence: 100}
	parent := NewChain(pen, NewDist(1, 2))
	parent.Accept(3)
	child := parent.Clone().(*Chain)

	// Generators: the child replays the parent's future, and advancing one
	// does not move the other.
	var c Candidates
	pa := []int{parent.Sample(&c, logits), parent.Sample(&c, logits)}
	ch := []int{child.Sample(&c, logits), child.Sample(&c, logits)}
	if !slices.Equal(pa, ch) {
		t.Errorf("clone draws %v, parent %v", ch, pa)
	}
	snapshot := parent.Clone().(*Chain)
	for range 3 {
		child.Sample(&c, logits) // advancing the child ...
	}
	for range 5 { // ... leaves the parent where it was
		if a, b := parent.Sample(&c, logits), snapshot.Sample(&c, logits); a != b {
			t.Fatalf("parent drew %d after the child advanced, snapshot %d", a, b)
		}
	}

	// Histories: token 5 accepted by the child only is penalized there only.
	child.Accept(5)
	c.Reset(logits)
	parent.Samplers()[0].Apply(&c)
	if c.Items[5].Logit != 0 || c.Items[3].Logit != -100 {
		t.Errorf("parent history leaked: logits[3]=%v logits[5]=%v", c.Items[3].Logit, c.Items[5].Logit)
	}
	c.Reset(logits)
	child.Samplers()[0].Apply(&c)
	if c.Items[5].Logit != -100 || c.Items[3].Logit != -100 {
		t.Errorf("child history: logits[3]=%v logits[5]=%v", c.Items[3].Logit, c.Items[5].Logit)
	}
	parent.Reset()
	c.Reset(logits)
	child.Samplers()[0].Apply(&c)
	if c.Items[3].Logit != -100 {
		t.Error("parent Reset cleared the child's history")
	}
}

func TestPenalties(t *testing.T) {
	p := &Penalties{Window: 3, Repeat: 2, Frequency: 0.5, Presence: 1}
	for _, tok := range []int{9, 1, 2, 1} { // 9 falls out of the window
		p.Accept(tok)
	}
	var c Candidates
	c.Reset([]float32{4, 4, -4, 4, 0, 0, 0, 0, 0, 4})
	p.Apply(&c)
	want := []float32{4, 4./2 - 2*0.5 - 1, -4*2 - 0.5 - 1, 4, 0, 0, 0, 0, 0, 4}
	for i, w := range want {
		if c.Items[i].Logit != w {
			t.Errorf("logit %d = %v, want %v", i, c.Items[i].Logit, w)
		}
	}
	// The same on a reordered set.
	c.Reset([]float32{4, 4, -4, 4, 0, 0, 0, 0, 0, 4})
	c.KeepTopK(5)
	p.Apply(&c)
	for _, it := range c.Items {
		if it.ID == 1 && it.Logit != want[1] {
			t.Errorf("reordered: token 1 logit %v, want %v", it.Logit, want[1])
		}
	}
	p.Unaccept()
	p.Unaccept()
	if got := p.recent(); !slices.Equal(got, []int32{9, 1}) {
		t.Errorf("after two Unaccepts: %v", got)
	}
	// A long history stays bounded.
	for i := range 1000 {
		p.Accept(i)
	}
	if len(p.hist) > 2*p.window() {
		t.Errorf("history grew to %d", len(p.hist))
	}
}

func TestChainName(t *testing.T) {
	ch := NewChain(&Penalties{}, Temperature(0.7), TopK(40), TopP(0.9), MinP(0.05), NewDist(1, 1))
	if got := ch.Name(); got != "chain(penalties, temp=0.7, top-k=40, top-p=0.9, min-p=0.05, dist)" {
		t.Errorf("name %q", got)
	}
}

func FuzzTopP(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5}, uint8(128))
	f.Add([]byte{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 1}, uint8(200))
	f.Add(make([]byte, 100), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, pb uint8) {
		logits := make([]float32, len(b))
		for i, x := range b {
			logits[i] = float32(x) / 16
		}
		p := float64(pb) / 255
		var c Candidates
		c.Reset(logits)
		c.KeepTopP(p)
		if len(b) == 0 {
			return
		}
		if c.Len() < 1 {
			t.Fatal("top-p kept nothing")
		}
		want := refTopP(logits, p)
		if p <= 0 {
			want = 1
		}
		if p >= 1 {
			want = len(b)
		}
		if c.Len() < want-1 || c.Len() > want+1 { // ±1: rounding when the mass hits p exactly
			t.Fatalf("p=%v: kept %d, want %d", p, c.Len(), want)
		}
	})
}

// BenchmarkSampleChain is the classic chain (temperature, min-p, top-k,
// top-p, draw) over a whole row.
func BenchmarkSampleChain(b *testing.B) {
	for _, n := range vocabs {
		logits := randomLogits(rand.New(rand.NewPCG(5, 6)), n)
		ch := NewChain(Temperature(0.7), MinP(0.03), TopK(40), TopP(0.9), NewDist(1, 1))
		var c Candidates
		b.Run(fmt.Sprintf("vocab=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ch.Sample(&c, logits)
			}
		})
	}
}

// BenchmarkSampleChains covers the chains the engine builds from its
// options: its defaults (engine.DefaultSampling: temperature 0.8, min-p
// 0.05, top-k 40, top-p 0.95) with and without repetition penalties, and
// chains of one cut or none (temperature alone and top-p alone need the
// softmax of the whole row).
func BenchmarkSampleChains(b *testing.B) {
	chains := []struct {
		name   string
		stages func() []Sampler
	}{
		{"default", func() []Sampler { return []Sampler{Temperature(0.8), MinP(0.05), TopK(40), TopP(0.95)} }},
		{"penalties", func() []Sampler {
			pen := &Penalties{Window: 64, Repeat: 1.1}
			for i := range 64 {
				pen.Accept(i * 97)
			}
			return []Sampler{pen, Temperature(0.8), MinP(0.05), TopK(40), TopP(0.95)}
		}},
		{"min-p", func() []Sampler { return []Sampler{Temperature(0.8), MinP(0.05)} }},
		{"top-k", func() []Sampler { return []Sampler{Temperature(0.8), TopK(40)} }},
		{"top-p", func() []Sampler { return []Sampler{Temperature(0.8), TopP(0.95)} }},
		{"temp", func() []Sampler { return []Sampler{Temperature(0.8)} }},
	}
	for _, n := range vocabs {
		logits := randomLogits(rand.New(rand.NewPCG(5, 6)), n)
		// A flat row (a random model's, or an unsure one): min-p 0.05
		// at temperature 0.8 keeps 1367 of 32000 logits.
		flat := make([]float32, n)
		r := rand.New(rand.NewPCG(5, 6))
		for i := range flat {
			flat[i] = float32(r.NormFloat64())
		}
		for _, ch := range chains {
			for _, row := range []struct {
				name   string
				logits []float32
			}{{"", logits}, {"flat-", flat}} {
				if row.name != "" && ch.name != "default" && ch.name != "top-k" {
					continue
				}
				c := NewChain(append(ch.stages(), NewDist(1, 1))...)
				var cands Candidates
				b.Run(fmt.Sprintf("%s%s/vocab=%d", row.name, ch.name, n), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						c.Sample(&cands, row.logits)
					}
				})
			}
		}
	}
}

// BenchmarkTopPUnsorted is top-p alone over a whole flat row (the
// mass-aware quickselect, no sort of the vocabulary).
func BenchmarkTopPUnsorted(b *testing.B) {
	for _, n := range vocabs {
		r := rand.New(rand.NewPCG(5, 6))
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.NormFloat64())
		}
		var c Candidates
		b.Run(fmt.Sprintf("vocab=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Reset(logits)
				c.KeepTopP(0.9)
			}
		})
	}
}

// sameCandidates reports whether two Candidates hold the same items (the
// logits compared bit for bit), selection and order flags.
func sameCandidates(a, b *Candidates) bool {
	if len(a.Items) != len(b.Items) || a.Selected != b.Selected || a.sorted != b.sorted || a.identity != b.identity {
		return false
	}
	for i, x := range a.Items {
		y := b.Items[i]
		if x.ID != y.ID || math.Float32bits(x.Logit) != math.Float32bits(y.Logit) {
			return false
		}
	}
	return true
}

// sampleRow returns a row of n logits of one of several shapes: language
// model-like, tied, masked (-Inf), flat, huge (overflowing when scaled),
// far below 0, clustered within a few ulps, signed zeros, subnormal, and
// now and then with a NaN or +Inf.
func sampleRow(r *rand.Rand, n int) []float32 {
	row := randomLogits(r, n)
	switch r.IntN(11) {
	case 0: // ties
		q := float32(1 + r.IntN(8))
		for i := range row {
			row[i] = float32(r.IntN(12)) / q
		}
	case 1: // masked
		f := r.Float64()
		for i := range row {
			if r.Float64() < f {
				row[i] = float32(math.Inf(-1))
			}
		}
	case 2: // flat
		v := float32(r.NormFloat64())
		for i := range row {
			row[i] = v
		}
	case 3: // huge
		for i := range row {
			row[i] = float32(r.NormFloat64() * 1e38)
		}
	case 4: // a few ulps apart
		v := float32(r.NormFloat64() * 4)
		for i := range row {
			x := v
			for range r.IntN(6) {
				x = math.Nextafter32(x, float32(math.Inf(1)))
			}
			row[i] = x
		}
	case 6: // far below 0, -Inf among them: max·(1/T) can overflow to -Inf
		for i := range row {
			row[i] = -math.MaxFloat32 * float32(0.5+0.5*r.Float64())
			if r.IntN(4) == 0 {
				row[i] = float32(math.Inf(-1))
			}
		}
	case 5: // signed zeros and subnormals
		for i := range row {
			switch r.IntN(4) {
			case 0:
				row[i] = float32(math.Copysign(0, -1))
			case 1:
				row[i] = 0
			case 2:
				row[i] = math.Float32frombits(uint32(r.IntN(100)))
			default:
				row[i] = -math.Float32frombits(uint32(r.IntN(100)))
			}
		}
	}
	if r.IntN(25) == 0 {
		bad := []float32{float32(math.NaN()), math.Float32frombits(0x7f800001), // quiet, signaling
			float32(math.Inf(1)), float32(math.Inf(-1))}
		row[r.IntN(n)] = bad[r.IntN(len(bad))]
	}
	return row
}

// plantCut copies, at random places of row, the logits at and a few ulps
// around the least one that min-p at temperature t keeps, and the k-th
// largest logit (ties at the top-k cut).
func plantCut(r *rand.Rand, row []float32, t, p float64, k int) {
	if len(row) < 2 {
		return
	}
	if p > 0 {
		inv := float32(1)
		if t > 0 && t != 1 {
			inv = float32(1 / t)
		}
		m := slices.Max(row) * inv
		cut := float32(float64(m) + math.Log(min(p, 1)))
		x := float32(float64(cut) / float64(inv))
		for range 3 {
			x = math.Nextafter32(x, float32(math.Inf(-1)))
		}
		for range 7 {
			row[r.IntN(len(row))] = x
			x = math.Nextafter32(x, float32(math.Inf(1)))
		}
	}
	if k > 0 && k < len(row) {
		s := slices.Clone(row)
		slices.SortFunc(s, func(a, b float32) int { return cmpF(float64(b), float64(a)) })
		for range 1 + r.IntN(3) {
			row[r.IntN(len(row))] = s[k-1]
		}
	}
}

// plantFloor raises the logits sampleFloor samples for a top-k above the
// rest, so that its floor leaves fewer than k+1 logits above it.
func plantFloor(r *rand.Rand, row []float32, k int) {
	m, stride, _ := floorSample(len(row), k)
	if m == 0 {
		return
	}
	top := slices.Max(row)
	for i := range m {
		row[i*stride] = top + 1 + r.Float32()
	}
}

// TestSampleMatchesStages: Chain.Sample, which fuses a chain's first
// stages into loading the row (a min-p or top-k cut loads only the tokens
// that pass), draws the same tokens and leaves the same candidates, bit
// for bit, as loading the whole row and applying every stage in turn,
// over random rows (1 to 128256 logits), chains (penalties, temperature
// 0, 1, negative, NaN or odd, min-p, top-k, top-p, in the engine's order
// or shuffled) and seeds.
func TestSampleMatchesStages(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	inf, nan := math.Inf(1), math.NaN()
	temps := []float64{0, -1, nan, 1, 1, 1 + 1e-12, 0.7, 0.8, 0.8, 1.5, 0.01, 3, 1e-30, 1e30, inf, 1e-39}
	minPs := []float64{0, 0, 0.01, 0.05, 0.05, 0.3, 1, 2, nan}
	topKs := []int{0, 0, 1, 2, 5, 40, 40, 1000}
	topPs := []float64{0, 0.5, 0.9, 0.95, 1, 1}
	sizes := []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 512, 1000, 4096}
	var a, b, probe Candidates // reused, as the engine reuses its own
	cases := 2500
	if testing.Short() {
		cases = 500
	}
	fused := 0
	for i := range cases {
		var n int
		switch {
		case i%500 == 7:
			n = 128256
		case i%100 == 3:
			n = 32000
		case i%2 == 0:
			n = sizes[r.IntN(len(sizes))]
		default:
			n = 1 + r.IntN(5000)
		}
		temp := temps[r.IntN(len(temps))]
		if r.IntN(5) == 0 {
			temp = 0.1 + 2*r.Float64()
		}
		minP, topK, topP := minPs[r.IntN(len(minPs))], topKs[r.IntN(len(topKs))], topPs[r.IntN(len(topPs))]
		row := sampleRow(r, n)
		switch r.IntN(6) {
		case 0, 1:
			plantCut(r, row, temp, minP, topK)
		case 2:
			plantFloor(r, row, topK)
		}
		var stages []Sampler
		if r.IntN(4) == 0 {
			pen := &Penalties{Window: 1 + r.IntN(16), Repeat: []float64{0, 1, 1.3, 0.8}[r.IntN(4)],
				Frequency: []float64{0, 0.5}[r.IntN(2)], Presence: []float64{0, 1, -0.5}[r.IntN(3)]}
			for range r.IntN(20) {
				pen.Accept(r.IntN(n + 2))
			}
			stages = append(stages, pen)
		}
		body := []Sampler{Temperature(temp), MinP(minP), TopK(topK), TopP(topP)}
		if r.IntN(4) == 0 {
			r.Shuffle(len(body), func(i, j int) { body[i], body[j] = body[j], body[i] })
		}
		body = slices.DeleteFunc(body, func(Sampler) bool { return r.IntN(5) == 0 })
		stages = append(stages, body...)
		if r.IntN(8) == 0 {
			stages = append(stages, ArgMax{})
		} else {
			stages = append(stages, NewDist(r.Uint64(), r.Uint64()))
		}
		ref := NewChain(stages...)
		fast := ref.Clone().(*Chain)
		if fast.load(&probe, row) > 0 {
			fused++
		}
		for d := range 3 {
			a.Reset(row)
			ref.Apply(&a)
			ta := a.Token()
			tb := fast.Sample(&b, row)
			if ta != tb || !sameCandidates(&a, &b) {
				t.Fatalf("case %d draw %d, n=%d, %s: Sample drew %d from %d candidates (sorted %v), the stages %d from %d (sorted %v)",
					i, d, n, ref.Name(), tb, len(b.Items), b.sorted, ta, len(a.Items), a.sorted)
			}
			ref.Accept(max(ta, 0))
			fast.Accept(max(tb, 0))
		}
	}
	// Most chains begin with stages Sample fuses.
	if fused < cases/2 {
		t.Errorf("only %d of %d chains took a fused load", fused, cases)
	}
}
