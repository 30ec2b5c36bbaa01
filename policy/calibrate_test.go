package policy

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// syntheticRows draws rows of many shapes: confident, flat, a few options
// over a tail, and lost, so that every quadrant is populated.
func syntheticRows(r *rand.Rand, rows, vocab int) [][]float32 {
	out := make([][]float32, rows)
	for i := range out {
		l := make([]float32, vocab)
		scale := 0.2 + 2.5*r.Float64()
		for j := range l {
			l[j] = float32(r.NormFloat64() * scale)
		}
		for range r.IntN(4) {
			l[r.IntN(vocab)] += float32(15 * r.Float64())
		}
		out[i] = l
	}
	return out
}

func observe(t testing.TB, rows [][]float32) []Metrics {
	t.Helper()
	obs := make([]Metrics, len(rows))
	for i, row := range rows {
		m, err := Measure(row, 0)
		if err != nil {
			t.Fatal(err)
		}
		obs[i] = m
	}
	return obs
}

// checkHoldout calibrates on train and checks the quadrant shares on train
// (tight) and on held-out (within tol) against the targets.
func checkHoldout(t *testing.T, train, held []Metrics, tg Targets, trainTol, tol float64) Thresholds {
	t.Helper()
	th, err := Calibrate(train, tg)
	if err != nil {
		t.Fatal(err)
	}
	ct, ch := Count(train, th), Count(held, th)
	t.Logf("thresholds %+v", th)
	t.Logf("train    %v", ct)
	t.Logf("held-out %v", ch)
	for q := range Quadrant(NumQuadrants) {
		want := tg.Share(q)
		if got := ct.Share(q); math.Abs(got-want) > trainTol {
			t.Errorf("train: %v share %.3f, want %.3f ± %.3f", q, got, want, trainTol)
		}
		if got := ch.Share(q); math.Abs(got-want) > tol {
			t.Errorf("held-out: %v share %.3f, want %.3f ± %.3f", q, got, want, tol)
		}
	}
	return th
}

func TestCalibrateSynthetic(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	train := observe(t, syntheticRows(r, 3000, 512))
	held := observe(t, syntheticRows(r, 3000, 512))
	for _, tg := range []Targets{
		DefaultTargets(),
		{LELV: 0.25, HELV: 0.10, LEHV: 0.20, HEHV: 0.10},
		{LELV: 0.5},
		{LEHV: 0.3},
	} {
		checkHoldout(t, train, held, tg, 0.005, 0.03)
	}
}

func TestCalibrateEdges(t *testing.T) {
	if _, err := Calibrate(nil, DefaultTargets()); err == nil {
		t.Error("no observations: no error")
	}
	obs := []Metrics{{Entropy: 1, Varentropy: 1}, {Entropy: math.NaN()}}
	if _, err := Calibrate(obs, DefaultTargets()); err == nil {
		t.Error("NaN observation: no error")
	}
	if _, err := Calibrate(obs[:1], Targets{LELV: 0.7, LEHV: 0.7}); err == nil {
		t.Error("targets over 1: no error")
	}
	// Identical observations: thresholds are still valid.
	same := make([]Metrics, 50)
	for i := range same {
		same[i] = Metrics{Entropy: 1, Varentropy: 2}
	}
	th, err := Calibrate(same, DefaultTargets())
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Validate(); err != nil {
		t.Error(err)
	}
	// Everything confident.
	th, err = Calibrate(same, Targets{LELV: 1})
	if err != nil || Count(same, th)[LELV] != 50 {
		t.Errorf("all LELV: %+v %v", th, err)
	}
}

func TestThresholdsJSON(t *testing.T) {
	var b bytes.Buffer
	th := EntropixV1
	if err := WriteThresholds(&b, th); err != nil {
		t.Fatal(err)
	}
	back, err := ReadThresholds(&b)
	if err != nil || back != th {
		t.Fatalf("round trip %+v, %v", back, err)
	}
	path := filepath.Join(t.TempDir(), "th.json")
	if err := SaveThresholds(path, th); err != nil {
		t.Fatal(err)
	}
	if back, err := LoadThresholds(path); err != nil || back != th {
		t.Fatalf("file round trip %+v, %v", back, err)
	}
	for _, bad := range []string{
		`{"low_entropy": 0.1, "low_entropi": 3}`,
		`{"low_entropy": -1}`,
		`{"low_entropy": 5, "high_entropy": 1}`,
		`[1,2]`,
		``,
		`{}`, // every threshold 0 (issue 19): each must be given
		`{"low_entropy": 0.1, "low_varentropy": 0.1, "high_entropy": 3, "high_varentropy": 5, "branch_entropy": 5}`,
	} {
		if _, err := ReadThresholds(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := LoadThresholds(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file: no error")
	}
}

func FuzzReadThresholds(f *testing.F) {
	var b bytes.Buffer
	WriteThresholds(&b, EntropixV1)
	f.Add(b.String())
	f.Add(`{"name":"x","low_entropy":1e308,"high_entropy":1e309}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, s string) {
		th, err := ReadThresholds(strings.NewReader(s))
		if err != nil {
			return
		}
		if th.Validate() != nil {
			t.Fatalf("invalid thresholds accepted: %+v", th)
		}
		var out bytes.Buffer
		if err := WriteThresholds(&out, th); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCalibrateSearch(t *testing.T) {
	var obs []Observation
	for i := range 1000 {
		x := float64(i) / 1000
		obs = append(obs, Observation{Metrics: Metrics{Entropy: 3 * x, Varentropy: 10 * x * x}, Ratio: x * x, PrevP: 1 - x})
	}
	f, err := CalibrateSearch(obs, DefaultFile(), DefaultSearchTargets())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range obs {
		if o.Ratio >= f.Fork.MinP(o.Metrics.Varentropy) {
			n++
		}
	}
	if share := float64(n) / float64(len(obs)); math.Abs(share-0.05) > 0.01 {
		t.Errorf("fork share %v, want 0.05 (fork %+v)", share, f.Fork)
	}
	if f.BackspaceBelow < 0.015 || f.BackspaceBelow > 0.025 {
		t.Errorf("backspace below %v, want the 2%% quantile 0.02", f.BackspaceBelow)
	}
	if sc := f.Scales.Varentropy; !near(sc.Mean, 10.0/3, 0.05) || sc.SD <= 0 {
		t.Errorf("varentropy scale %+v, want mean 10/3", sc)
	}
	if c := Count(ms(obs), f.Thresholds); c.Share(HELV) != 0 {
		t.Errorf("HELV share %v, want none", c.Share(HELV))
	}
	if _, err := CalibrateSearch([]Observation{{Ratio: 2}}, DefaultFile(), DefaultSearchTargets()); err == nil {
		t.Error("a ratio of 2 was accepted")
	}
	if _, err := CalibrateSearch(nil, DefaultFile(), DefaultSearchTargets()); err == nil {
		t.Error("no observations accepted")
	}
}

func ms(obs []Observation) []Metrics {
	var m []Metrics
	for _, o := range obs {
		m = append(m, o.Metrics)
	}
	return m
}
