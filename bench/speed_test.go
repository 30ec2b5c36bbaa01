package bench

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

var (
	benchShape = flag.String("shape", "stories110M", "model shape of the speed benchmarks: "+strings.Join(synth.Names(), ", "))
	benchKV    = flag.String("kv", "f32", "KV cache type of the speed benchmarks: f32 or f16")
)

// benchKVType is -kv as a kvcache.ElemType.
func benchKVType(b *testing.B) kvcache.ElemType {
	t, err := kvcache.ParseElemType(*benchKV)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// tinyConfig keeps the speed functions' tests fast.
func tinyConfig() SpeedConfig {
	return SpeedConfig{
		Rounds: 2, DecodeTokens: 6, Prefix: 5, Steps: 2, Branches: []int{1, 2, 5},
		PromptTokens: 9, ForkPrefixes: []int{1, 16, 40}, TreePrefix: 40, TreeSteps: 9, BlockSize: 4,
	}
}

func TestMeasureSpeed(t *testing.T) {
	shape := synth.Shapes["stories260K"]
	m, err := synth.Generate(shape, kernels.Q8_0, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := tinyConfig()
	rep, err := MeasureSpeed(m, shape.Name, kernels.Q8_0, shape.Params(), c)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Decode.Tokens != 6 || !(rep.Decode.TokensPerSec > 0) {
		t.Errorf("decode %+v", rep.Decode)
	}
	if len(rep.Steps) != 3 || rep.Steps[0].VsOne != 1 || rep.Steps[2].Branches != 5 || !(rep.Steps[2].Step > 0) {
		t.Errorf("steps %+v", rep.Steps)
	}
	if rep.Prefill.Tokens != 9 || !(rep.Prefill.TokensPerSec > 0) {
		t.Errorf("prefill %+v", rep.Prefill)
	}
	cfg := shape.Config()
	kvBytes := func(n int) int64 { return int64(n * shape.Layers * 2 * cfg.KVDim() * 4) }
	for i, want := range []struct{ prefix, blocks int }{{1, 1}, {16, 4}, {40, 10}} {
		f := rep.Forks[i]
		if f.Prefix != want.prefix || f.Blocks != want.blocks || f.KVBytes != kvBytes(want.prefix) || !(f.Fork > 0) {
			t.Errorf("fork %d: %+v, want prefix %d in %d blocks", i, f, want.prefix, want.blocks)
		}
	}
	// 40 shared positions are 10 full blocks; 9 more positions take 3
	// private blocks per branch.
	block := kvBytes(4)
	for i, b := range []int{1, 2, 5} {
		tm := rep.TreeMem[i]
		if tm.Branches != b || tm.BytesInUse != int64(10+3*b)*block || tm.PrivateBytes != int64(13*b)*block {
			t.Errorf("tree of %d branches: %+v, want %d blocks in use and %d private", b, tm, 10+3*b, 13*b)
		}
	}
	var sb strings.Builder
	if err := rep.Markdown(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## stories260K Q8_0", "| 5 |", "single-stream decode (6 tokens", "| 40 | 10 |", "saving"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, sb.String())
		}
	}
}

func TestMeasureBadConfig(t *testing.T) {
	m, err := synth.Generate(synth.Shapes["stories260K"], kernels.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := tinyConfig()
	c.Prefix = 600 // past the context of 512
	if _, err := MeasureBranchSteps(m, c); err == nil {
		t.Error("a prefix past the context was measured")
	}
}

// TestRunLlamaBench runs a stand-in for llama-bench that prints what the
// real one prints with -o json.
func TestRunLlamaBench(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in is a shell script")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "llama-bench")
	script := `#!/bin/sh
echo "loading model $2" >&2
cat <<'EOF'
[
  {
    "build_commit": "abc1234",
    "cpu_info": "Test CPU",
    "n_threads": 2,
    "n_prompt": 0,
    "n_gen": 128,
    "avg_ts": 61.5,
    "stddev_ts": 0.75,
    "samples_ts": [ 61.0, 62.0 ]
  }
]
EOF
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := RunLlamaBench(context.Background(), fake, "model.gguf", 2, 128)
	if err != nil {
		t.Fatal(err)
	}
	if r.TokensPerSec != 61.5 || r.StdDev != 0.75 || r.Threads != 2 || r.Build != "abc1234" || r.Tokens != 128 {
		t.Errorf("parsed %+v", r)
	}
	if _, err := RunLlamaBench(context.Background(), fake, "model.gguf", 2, 64); err == nil {
		t.Error("no error when the decode test is missing")
	}
	if _, err := RunLlamaBench(context.Background(), filepath.Join(dir, "absent"), "m", 2, 128); err == nil {
		t.Error("no error for a missing binary")
	}
}

// The benchmarks run on a generated model of -shape (default stories110M):
//
//	go test -run '^$' -bench . ./bench -args -shape stories110M

var models sync.Map // "shape/dtype" -> *model.Model

func benchModel(b *testing.B, dt kernels.DType) *model.Model {
	b.Helper()
	shape, err := synth.Lookup(*benchShape)
	if err != nil {
		b.Fatal(err)
	}
	key := shape.Name + "/" + dt.String()
	if m, ok := models.Load(key); ok {
		return m.(*model.Model)
	}
	m, err := synth.Generate(shape, dt, 1)
	if err != nil {
		b.Fatal(err)
	}
	models.Store(key, m)
	return m
}

var dtypes = []kernels.DType{kernels.F32, kernels.Q8_0, kernels.Q4_K} // Q4_K: the Q4_K_M mix

// BenchmarkDecode is single-stream decoding: one row per Forward.
func BenchmarkDecode(b *testing.B) {
	for _, dt := range dtypes {
		b.Run(dt.String(), func(b *testing.B) {
			benchSteps(b, benchModel(b, dt), 1, 0)
		})
	}
}

// BenchmarkBranchStep is one Forward of B forks of a 64-token prefix, one
// row each. Compare the ns/op of B=16 with B=1.
func BenchmarkBranchStep(b *testing.B) {
	for _, dt := range dtypes {
		for _, n := range DefaultSpeedConfig().Branches {
			b.Run(fmt.Sprintf("%v/B=%d", dt, n), func(b *testing.B) {
				benchSteps(b, benchModel(b, dt), n, 64)
			})
		}
	}
}

// benchSteps times Forward steps of n branches forked from a prefix; every
// 64 steps the branches are forked again (untimed) so that positions stay
// in [prefix, prefix+64).
func benchSteps(b *testing.B, m *model.Model, n, prefix int) {
	const span = 64
	bs := kvcache.DefaultBlockSize
	be, err := model.NewBackend("cpu", m, model.CacheConfig{Tokens: prefix + bs + n*(span+bs), BlockSize: bs, DType: benchKVType(b)})
	if err != nil {
		b.Fatal(err)
	}
	r, kv := be, be.Cache()
	root := kv.NewSeq()
	rows := make([]model.Row, 0, max(n, prefix))
	for i := range prefix {
		rows = append(rows, model.Row{Seq: root, Token: (i * 7919) % m.Config.Vocab, NoLogits: i < prefix-1})
	}
	if prefix > 0 {
		if _, err := r.Forward(rows); err != nil {
			b.Fatal(err)
		}
	}
	seqs := make([]*kvcache.Seq, n)
	refork := func() {
		for i, s := range seqs {
			if s != nil {
				kv.Free(s)
			}
			seqs[i] = kv.Fork(root)
		}
	}
	refork()
	step := 0
	b.ResetTimer()
	for b.Loop() {
		if step == span {
			b.StopTimer()
			refork()
			step = 0
			b.StartTimer()
		}
		rows = rows[:0]
		for i, s := range seqs {
			rows = append(rows, model.Row{Seq: s, Token: (step*131 + i*17) % m.Config.Vocab})
		}
		if _, err := r.Forward(rows); err != nil {
			b.Fatal(err)
		}
		step++
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkPrefill feeds a 128-token prompt as one Forward.
func BenchmarkPrefill(b *testing.B) {
	for _, dt := range dtypes {
		b.Run(dt.String(), func(b *testing.B) {
			m := benchModel(b, dt)
			const n = 128
			be, err := model.NewBackend("cpu", m, model.CacheConfig{Tokens: n, BlockSize: kvcache.DefaultBlockSize, DType: benchKVType(b)})
			if err != nil {
				b.Fatal(err)
			}
			r, kv := be, be.Cache()
			rows := make([]model.Row, n)
			for b.Loop() {
				seq := kv.NewSeq()
				for i := range rows {
					rows[i] = model.Row{Seq: seq, Token: (i * 7919) % m.Config.Vocab, NoLogits: i < n-1}
				}
				if _, err := r.Forward(rows); err != nil {
					b.Fatal(err)
				}
				kv.Free(seq)
			}
			b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkFork is kvcache Fork (and the Free that follows) of a sequence
// of each prefix length, in a pool of the -shape model's KV shape.
func BenchmarkFork(b *testing.B) {
	shape, err := synth.Lookup(*benchShape)
	if err != nil {
		b.Fatal(err)
	}
	cfg := shape.Config()
	for _, n := range DefaultSpeedConfig().ForkPrefixes {
		b.Run(fmt.Sprintf("prefix=%d", n), func(b *testing.B) {
			bs := kvcache.DefaultBlockSize
			kv, err := kvcache.New(kvcache.Config{Layers: cfg.Layers, KVDim: cfg.KVDim(), BlockSize: bs, MaxBlocks: (n + bs - 1) / bs})
			if err != nil {
				b.Fatal(err)
			}
			seq := kv.NewSeq()
			for range n {
				if _, err := kv.Append(seq); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				kv.Free(kv.Fork(seq))
			}
		})
	}
}

// TestQuickConfigIsQuick keeps -quick honest about its size.
func TestQuickConfigIsQuick(t *testing.T) {
	q, d := QuickSpeedConfig(), DefaultSpeedConfig()
	if q.Rounds > d.Rounds || q.DecodeTokens > d.DecodeTokens || q.Steps > d.Steps {
		t.Errorf("quick %+v is not smaller than default %+v", q, d)
	}
	if c := (SpeedConfig{}).withDefaults(); c.Rounds != d.Rounds || len(c.Branches) != len(d.Branches) || c.BlockSize != d.BlockSize {
		t.Errorf("zero config with defaults: %+v", c)
	}
}

// CompareDecode runs interleaved pairs, records the load and reports the
// median of the pairs' ratios.
func TestCompareDecodePairs(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in is a shell script")
	}
	fake := filepath.Join(t.TempDir(), "llama-bench")
	script := `#!/bin/sh
echo "[{\"build_commit\": \"x\", \"n_threads\": $4, \"n_prompt\": $6, \"n_gen\": $8, \"avg_ts\": 100, \"stddev_ts\": 0}]"
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	shape, _ := synth.Lookup("stories260K")
	m, err := synth.Generate(shape, kernels.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CompareDecode(context.Background(), m, fake, "model.gguf", 8, 3, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Ours) != 3 || len(c.Llama) != 3 || len(c.Load) != 3 || c.LlamaKV != "f16" {
		t.Fatalf("%+v", c)
	}
	rs := c.Ratios()
	if want := Median([]float64{c.Ours[0] / 100, c.Ours[1] / 100, c.Ours[2] / 100}); c.MedianRatio() != want || len(rs) != 3 {
		t.Errorf("median ratio %g, want %g (%v)", c.MedianRatio(), want, rs)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing is not NaN")
	}
	p, err := ComparePrefill(context.Background(), m, fake, "model.gguf", 16, 2, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	if p.Test != "prefill" || p.Tokens != 16 || len(p.Ours) != 2 || len(p.Llama) != 2 || p.Llama[0] != 100 {
		t.Fatalf("%+v", p)
	}
}

// CompareBranchStep reads llama-batched-bench's S_TG for the test it ran
// and pairs it with our branch step.
func TestCompareBranchStep(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in is a shell script")
	}
	table := `|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|    64 |      8 |    1 |     72 |    0.575 |   111.28 |    0.358 |    22.34 |    0.933 |    77.15 |
|    64 |      8 |    4 |     96 |    0.512 |   124.95 |    0.529 |    60.54 |    1.041 |    92.24 |`
	if v, err := parseBatchedBench(table, 64, 8, 4); err != nil || v != 60.54 {
		t.Errorf("S_TG %g, %v", v, err)
	}
	if _, err := parseBatchedBench(table, 64, 8, 16); err == nil {
		t.Error("a missing test was found")
	}
	if _, err := parseBatchedBench(strings.Replace(table, "60.54", "NaN", 1), 64, 8, 4); err == nil {
		t.Error("NaN accepted")
	}
	fake := filepath.Join(t.TempDir(), "llama-batched-bench")
	script := "#!/bin/sh\ncat <<'EOF'\n" + strings.ReplaceAll(table, "|    4 |", "|    2 |") + "\nEOF\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	shape, _ := synth.Lookup("stories260K")
	m, err := synth.Generate(shape, kernels.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CompareBranchStep(context.Background(), m, fake, "model.gguf", 2, 64, 2, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Ours) != 2 || c.Llama[0] != 60.54 || c.Test != "2-branch step" {
		t.Fatalf("%+v", c)
	}
}
