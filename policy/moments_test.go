package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/policy/rowstat"
)

// kernelMoments are row's moments taken as measureLogits takes them (the
// same kernels), with its top k.
func kernelMoments(row []float32, k int) Moments {
	m := Moments{N: len(row)}
	if len(row) == 0 {
		return m
	}
	m.Max, m.Arg, m.Second = rowstat.Top2(row)
	if !math.IsInf(float64(m.Max), 0) {
		m.Z, m.A, m.B = rowstat.LogitMoments(row, m.Max)
	}
	for _, t := range TopTokens(row, k, -1, nil) {
		m.Top = append(m.Top, int32(t))
		m.TopLogits = append(m.TopLogits, row[t])
	}
	return m
}

// exactMoments are row's moments summed in float64 with math.Exp, as a
// GPU backend computes them (model.RowStatsOf).
func exactMoments(row []float32) Moments {
	m := kernelMoments(row, 0)
	m.Z, m.A, m.B = 0, 0, 0
	if math.IsInf(float64(m.Max), 0) {
		return m
	}
	for _, l := range row {
		s := float64(l) - float64(m.Max)
		if e := math.Exp(s); e != 0 {
			m.Z, m.A, m.B = m.Z+e, m.A+e*s, m.B+e*s*s
		}
	}
	return m
}

// momentRows are rows of every shape: language-model-like, masked,
// tied, flat, one token, fully masked, and a NaN.
func momentRows() [][]float32 {
	r := rand.New(rand.NewPCG(3, 4))
	ninf := float32(math.Inf(-1))
	rows := [][]float32{rowLELV, rowHELV, rowLEHV, rowHEHV, rowMid, {3}, {ninf, ninf}, {1, 1, 0}, {2, float32(math.NaN()), 1}}
	for i := range 60 {
		row := randomLogits(r, 10+r.IntN(3000))
		if i%3 == 0 {
			for j := range row {
				if r.IntN(4) == 0 {
					row[j] = ninf
				}
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// A row's moments give MeasureRow's Result without the row: bit for bit
// from the sums measureLogits takes, and to float64 rounding from exact
// sums (a GPU's).
func TestMeasureMomentsMatchesMeasureRow(t *testing.T) {
	for i, row := range momentRows() {
		wm, wr, werr := MeasureRow(row, 0)
		mm := MeasureMoments(kernelMoments(row, 8))
		m, r, err := mm.Result()
		if (err != nil) != (werr != nil) || m != wm || r != wr {
			t.Fatalf("row %d: %v %+v %v, want MeasureRow's %v %+v %v", i, m, r, err, wm, wr, werr)
		}
		if werr != nil {
			continue
		}
		mm = MeasureMoments(exactMoments(row))
		m, r, err = mm.Result()
		// The CPU's vectorized sums agree with exact ones to about 1e-6
		// relative (rowstat.LogitMoments).
		if r == wr && m == wm {
			continue
		}
		if err != nil || r.Arg != wr.Arg || !near(r.LogZ, wr.LogZ, 1e-6) || !near(r.Margin, wr.Margin, 1e-6) ||
			!near(m.Entropy, wm.Entropy, 1e-5) || !near(m.Varentropy, wm.Varentropy, 1e-5*(1+wm.Varentropy)) {
			t.Errorf("row %d: exact sums give %v %+v %v, MeasureRow %v %+v", i, m, r, err, wm, wr)
		}
	}
	if _, _, err := new(RowMeasure).Result(); err == nil {
		t.Error("an unmeasured row gave a result")
	}
}

// Decide given a row's moments and a way to fetch it decides as given the
// row, bit for bit, and fetches it only for a draw, the clarify test, a
// ban or penalty, a noise floor, or a fork wider than the top tokens.
func TestDecideFromMoments(t *testing.T) {
	ps := []float64{.4, .3, .2}
	for range 1000 {
		ps = append(ps, 1e-4)
	}
	rowFork := logs(ps...) // LEHV in search mode: a fork of 3
	type tc struct {
		name    string
		mode    DecideMode
		row     []float32
		k       int // top tokens measured
		cfg     func(c *Config)
		dec     func(d *Decider)
		fetches int
	}
	cases := []tc{
		{name: "LELV greedy", mode: SinglePath, row: rowLELV, k: 4},
		{name: "LELV search", mode: Search, row: rowLELV, k: 4},
		{name: "LEHV sample", mode: SinglePath, row: rowLEHV, k: 8, fetches: 1},
		{name: "HEHV resample", mode: SinglePath, row: rowHEHV, k: 8, fetches: 1},
		{name: "adaptive", mode: SinglePath, row: rowMid, k: 3, fetches: 1},
		{name: "HELV clarify", mode: SinglePath, row: rowHELV, k: 8, fetches: 1,
			cfg: func(c *Config) { c.Clarify = []int{5, 6} }},
		{name: "HELV search no clarify", mode: Search, row: rowHELV, k: 8},
		{name: "fork from the top", mode: Search, row: rowFork, k: 8},
		{name: "fork wider than the top", mode: Search, row: rowFork, k: 2, fetches: 1},
		{name: "fork past a ban", mode: Search, row: rowFork, k: 8,
			dec: func(d *Decider) { d.Accept(1); d.Rewind(1) }},
		{name: "banned argmax", mode: Search, row: rowLELV, k: 4, fetches: 1,
			dec: func(d *Decider) { d.Accept(0); d.Rewind(0) }},
		{name: "HEHV backspace", mode: Search, row: rowHEHV, k: 8,
			dec: func(d *Decider) { d.Accept(3) }},
		{name: "penalties", mode: SinglePath, row: rowLELV, k: 4, fetches: 1,
			cfg: func(c *Config) { c.Penalties = Penalties{Window: 8, Repeat: 1.3} }},
		{name: "noise floor", mode: Search, row: rowLEHV, k: 8, fetches: 1,
			cfg: func(c *Config) { c.NoiseFloor = 1e-3 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Mode = c.mode
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			var ds [2]*Decider
			for i := range ds {
				ds[i] = newDecider(t, cfg)
				ds[i].Prime([]int{7, 8, 9})
				if c.dec != nil {
					c.dec(ds[i])
				}
			}
			measured := measureLogits(c.row, 0)
			want := decide(t, ds[0], Step{Logits: c.row, Budget: 4, PrevLogProb: math.Log(.2),
				Measure: &RowMeasure{st: measured, ok: true, n: len(c.row)}})
			fetches := 0
			mm := MeasureMoments(kernelMoments(c.row, c.k))
			got := decide(t, ds[1], Step{Fetch: func() []float32 { fetches++; return c.row }, Budget: 4,
				PrevLogProb: math.Log(.2), Measure: &mm})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("from the moments: %v\nfrom the row:     %v", got, want)
			}
			if fetches != c.fetches {
				t.Errorf("%s: fetched the row %d times, want %d", want, fetches, c.fetches)
			}
			t.Logf("%s", want)
		})
	}
}

// A fork from the top tokens is the fork from the row for every width
// the top holds and every ban, ties included.
func TestForkFromTopTokens(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	f := DefaultFork()
	f.MaxWidth = MaxForkWidth
	for i := range 200 {
		row := make([]float32, 5+r.IntN(200))
		for j := range row {
			row[j] = float32(r.IntN(6)) / 2 // ties everywhere
		}
		st := measureLogits(row, 0)
		k := 1 + r.IntN(12)
		mm := MeasureMoments(kernelMoments(row, k))
		width, ban := 2+r.IntN(10), r.IntN(len(row)+1)-1
		fetched := false
		s := Step{Fetch: func() []float32 { fetched = true; return row }, Measure: &mm}
		got := fmt.Sprint(f.selectStats(nil, &s, &st, 30, width, ban))
		want := fmt.Sprint(f.selectStats(nil, &Step{Logits: row}, &st, 30, width, ban))
		if got != want {
			t.Fatalf("row %d, width %d, ban %d, top %d: %s, want %s", i, width, ban, k, got, want)
		}
		inTop := 0
		if slices.Contains(mm.top, int32(ban)) {
			inTop = 1
		}
		if needs := len(mm.top) < len(row) && width > len(mm.top)-inTop; fetched != needs {
			t.Errorf("row %d, width %d, ban %d, top %d: fetched %v", i, width, ban, k, fetched)
		}
	}
}
