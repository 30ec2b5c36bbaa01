package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestLogitEntropyVectors(t *testing.T) {
	cases := []struct {
		name   string
		logits []float32
		h, v   float64 // bits
		q      Quadrant
	}{
		{"uniform4", []float32{0, 0, 0, 0}, 2.000000, 0.000000, Adaptive},
		{"half-quarter-quarter", logs(.5, .25, .25), 1.500000, 0.250000, Adaptive},
		{"2,1,0,-1", []float32{2, 1, 0, -1}, 1.367007, 1.283344, Adaptive},
		{"10,0,0,0", []float32{10, 0, 0, 0}, 0.002161, 0.028340, LELV},
		{"p0=.8+1023", headAndTail(.8, 1023), 2.721646, 23.034588, LEHV},
		{"p0=.5+1023", headAndTail(.5, 1023), 5.999295, 24.992953, HEHV},
	}
	for _, c := range cases {
		h, v := LogitEntropy(c.logits)
		if !near(h, c.h, 1e-5) || !near(v, c.v, 1e-5) {
			t.Errorf("%s: H, V = %.6f, %.6f bits; want %.6f, %.6f", c.name, h, v, c.h, c.v)
		}
		if q := EntropixV1.Classify(h, v); q != c.q {
			t.Errorf("%s: quadrant %v, want %v", c.name, q, c.q)
		}
	}
}

func TestLogitEntropyNats(t *testing.T) {
	cases := []struct {
		logits []float32
		h, v   float64
	}{
		{[]float32{0, 0, 0, 0}, 1.386294, 0},
		{logs(.5, .25, .25), 1.039721, 0.120113},
		{[]float32{2, 1, 0, -1}, 0.947537, 0.616586},
	}
	for _, c := range cases {
		h, v := ToNats(LogitEntropy(c.logits))
		if !near(h, c.h, 1e-6) || !near(v, c.v, 1e-6) {
			t.Errorf("%v: H, V = %.6f, %.6f nats; want %.6f, %.6f", c.logits, h, v, c.h, c.v)
		}
	}
}

func TestLogitEntropyEdges(t *testing.T) {
	ninf := float32(math.Inf(-1))
	if h, v := LogitEntropy(nil); h != 0 || v != 0 {
		t.Errorf("empty: %v %v", h, v)
	}
	if h, v := LogitEntropy([]float32{3}); h != 0 || v != 0 {
		t.Errorf("single: %v %v", h, v)
	}
	// Masked tokens change nothing.
	h1, v1 := LogitEntropy([]float32{2, 1, 0, -1})
	h2, v2 := LogitEntropy([]float32{ninf, 2, 1, ninf, 0, -1, ninf})
	if !near(h1, h2, 1e-12) || !near(v1, v2, 1e-12) {
		t.Errorf("masked: %v %v vs %v %v", h2, v2, h1, v1)
	}
	if h, v := LogitEntropy([]float32{ninf, ninf}); h != 0 || v != 0 {
		t.Errorf("all masked: %v %v", h, v)
	}
	// Shift invariance, including huge offsets.
	h3, v3 := LogitEntropy([]float32{2e4 + 2, 2e4 + 1, 2e4, 2e4 - 1})
	if !near(h1, h3, 1e-3) || !near(v1, v3, 1e-3) { // float32 spacing at 2e4 is 2e-3
		t.Errorf("shifted: %v %v vs %v %v", h3, v3, h1, v1)
	}
	for _, bad := range [][]float32{{0, float32(math.NaN())}, {0, float32(math.Inf(1))}} {
		if h, v := LogitEntropy(bad); !math.IsNaN(h) || !math.IsNaN(v) {
			t.Errorf("%v: %v %v, want NaN", bad, h, v)
		}
		if _, err := Measure(bad, 0); err == nil {
			t.Errorf("Measure(%v): no error", bad)
		}
		if h, v := LogitEntropyFloor(bad, 1e-3); !math.IsNaN(h) || !math.IsNaN(v) {
			t.Errorf("%v with a noise floor: %v %v, want NaN", bad, h, v)
		}
	}
}

// TestLogitEntropyPrecision compares the one-pass formula with the centered
// two-pass reference over many shapes, large vocabularies included: no
// cancellation in b/z - (a/z)² beyond the exp's own error.
func TestLogitEntropyPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		n := []int{2, 5, 512, 32000}[i%4]
		logits := randomLogits(r, n)
		if i%7 == 0 { // a peaked row with a flat tail far below
			for j := range logits {
				logits[j] = -5 + float32(r.Float64()*1e-3)
			}
			logits[0] = 0
		}
		h, v := ToNats(LogitEntropy(logits))
		rh, rv := refEntropy(logits)
		// The sums are float64; each e^s is a float32 exp (about 1 ulp)
		// with AVX2, math.Exp without.
		if !near(h, rh, 1e-6*max(1, rh)) || !near(v, rv, 1e-6*max(1, rv)) {
			t.Fatalf("case %d (n=%d): H, V = %.12g, %.12g; reference %.12g, %.12g", i, n, h, v, rh, rv)
		}
	}
}

func TestNoiseFloor(t *testing.T) {
	if got := math.Log(NoiseFloor(128256)); !near(got, -10.73, 0.005) {
		t.Errorf("ln NoiseFloor(128256) = %.4f, want -10.73", got)
	}
	// With a floor, the 1023-token tail of .2 (p = 1.96e-4 each) is noise
	// when the floor is above it: only the head remains.
	logits := headAndTail(.8, 1023)
	if h, v := LogitEntropyFloor(logits, 1e-3); h != 0 || v != 0 {
		t.Errorf("floor above the tail: H, V = %v, %v, want 0, 0", h, v)
	}
	h0, v0 := LogitEntropy(logits)
	// The floor's pass sums math.Exp in float64, LogitEntropy's (with
	// AVX2) float32 exps and products: they agree to 1e-6 relative.
	if h, v := LogitEntropyFloor(logits, 1e-5); !near(h, h0, 1e-6*max(1, h0)) || !near(v, v0, 1e-6*max(1, v0)) {
		t.Errorf("floor below the tail: H, V = %v, %v, want %v, %v", h, v, h0, v0)
	}
	// Dropping tokens renormalizes the rest: (.5, .25, .25, tiny) -> (.5, .25, .25).
	l := logs(.5, .25, .25-1e-9, 1e-9)
	if h, v := LogitEntropyFloor(l, 1e-6); !near(h, 1.5, 1e-6) || !near(v, 0.25, 1e-6) {
		t.Errorf("renormalized: H, V = %v, %v, want 1.5, 0.25", h, v)
	}
}

func TestTopMargin(t *testing.T) {
	if got := TopMargin(logs(.5, .25, .25)); !near(got, .25, 1e-6) {
		t.Errorf("margin = %v, want .25", got)
	}
	if got := TopMargin([]float32{1}); got != 1 {
		t.Errorf("single-token margin = %v, want 1", got)
	}
	if got := TopMargin([]float32{3, 3}); got != 0 {
		t.Errorf("tie margin = %v, want 0", got)
	}
}

func TestMeasureNoAlloc(t *testing.T) {
	logits := randomLogits(rand.New(rand.NewPCG(3, 4)), 32000)
	att := attentionExample()
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := Measure(logits, 0, att); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Measure allocates %v times per call", allocs)
	}
}

func FuzzLogitEntropy(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{10, 0, 0, 0, 200, 17})
	f.Add([]byte{255, 1, 128, 3, 3, 3, 3, 3, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		logits := make([]float32, len(b))
		for i, x := range b {
			logits[i] = (float32(x) - 128) / 8 // -16 .. 16
		}
		h, v := LogitEntropy(logits)
		if len(b) == 0 {
			return
		}
		if h < 0 || v < 0 || h > math.Log2(float64(len(b)))+1e-9 {
			t.Fatalf("%v: H=%v V=%v out of range", logits, h, v)
		}
		rh, rv := refEntropy(logits)
		hn, vn := ToNats(h, v)
		if !near(hn, rh, 1e-9) || !near(vn, rv, 1e-8*max(1, rv)) {
			t.Fatalf("%v: H, V = %v, %v nats; reference %v, %v", logits, hn, vn, rh, rv)
		}
	})
}

var vocabs = []int{512, 32000, 128256}

// BenchmarkLogitEntropy reports ns per row (one row per op).
func BenchmarkLogitEntropy(b *testing.B) {
	for _, n := range vocabs {
		logits := randomLogits(rand.New(rand.NewPCG(5, 6)), n)
		b.Run(fmt.Sprintf("vocab=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				LogitEntropy(logits)
			}
		})
	}
}

// BenchmarkMeasure is the full metrics of one row: logits plus the last
// layer's attention (32 heads over 1024 positions, scores and probs given).
func BenchmarkMeasure(b *testing.B) {
	att := randomAttention(rand.New(rand.NewPCG(7, 8)), 32, 1024)
	for _, n := range vocabs {
		logits := randomLogits(rand.New(rand.NewPCG(5, 6)), n)
		b.Run(fmt.Sprintf("vocab=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Measure(logits, 0, att); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
