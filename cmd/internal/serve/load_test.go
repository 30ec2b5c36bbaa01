package serve

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/entropix-search/entropix-search/bench/arith"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
)

// BenchmarkServeLoad runs 1, 4, 16 and 64 concurrent clients for a
// bounded time against one server on loopback, each sending arith
// problems to beam-adaptive (276 rows, 4x greedy's answer), and reports
// requests/s, tokens/s, p50/p99 latency, forward rows per pass (the
// batching) and per second, errors (must be 0) and the KV blocks in use
// after the run (must be 0). requests/s at 16 clients over requests/s at 1 is what the
// batching across requests buys on this model. SERVE_LOAD_TIME sets each
// point's duration (default 3s), SERVE_LOAD_85M=1 adds an 85M-parameter
// model.
//
//	go test ./cmd/internal/serve -run X -bench ServeLoad -benchtime 1x
func BenchmarkServeLoad(b *testing.B) {
	probs := []string{
		"Question: Fay has 75 eggs. She sells 67 eggs. She buys 4 bags with 9 eggs in each bag. How many eggs does Fay have now?\\nAnswer:",
		"Question: Ben has 31 cards. Then Ben doubles the cards. He sells 34 cards. How many cards does Ben have now?\\nAnswer:",
		"Question: Gus has 30 pens. He loses 22 pens. Then Gus doubles the pens. How many pens does Gus have now?\\nAnswer:",
		"Question: Ned has 55 cookies. He gives 30 cookies to Ray. He sells 24 cookies. How many cookies does Ned have now?\\nAnswer:",
	}
	models := map[string]string{"arith": filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")}
	if os.Getenv("SERVE_LOAD_85M") != "" {
		models["85M"] = bigModel(b)
	}
	for name, path := range models {
		for _, clients := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("model=%s/clients=%d", name, clients), func(b *testing.B) {
				serveLoad(b, path, clients, probs)
			})
		}
	}
}

// bigModel writes a model of stories110M's width and depth (85M
// parameters, Q8_0, random weights) with the arith vocabulary: a model
// whose forward pass reads its weights from memory, as real ones do, so
// that batching pays as it does there. SERVE_LOAD_85M=1 adds it.
func bigModel(b *testing.B) string {
	b.Helper()
	v, err := arith.Vocab()
	if err != nil {
		b.Fatal(err)
	}
	shape := synth.Shape{Name: "85M-arith-vocab", Dim: 768, HiddenDim: 2048, Layers: 12, Heads: 12, KVHeads: 12,
		Vocab: len(v.Tokens), ContextLen: 512, RopeTheta: 10000, NormEps: 1e-5, Tied: true}
	path := filepath.Join(b.TempDir(), "85m.gguf")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := synth.WriteGGUF(f, shape, kernels.Q8_0, 1, v); err != nil {
		b.Fatal(err)
	}
	return path
}

func serveLoad(b *testing.B, path string, clients int, probs []string) {
	{
		{
			srv, url := startB(b, path, Config{MaxSearches: 64, Queue: 256})
			p0, r0 := srv.eng.Batching()
			var mu sync.Mutex
			var lat []time.Duration
			var tokens, errs int
			dur := 3 * time.Second
			if d, err := time.ParseDuration(os.Getenv("SERVE_LOAD_TIME")); err == nil {
				dur = d
			}
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				deadline := time.Now().Add(dur)
				var wg sync.WaitGroup
				for c := range clients {
					wg.Go(func() {
						for i := 0; time.Now().Before(deadline); i++ {
							body := `{"prompt": "` + probs[(c+i)%len(probs)] + `", "max_tokens": 120, "entropix": {"mode": "beam-adaptive", "budget_rows": 276}}`
							t0 := time.Now()
							resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
							if err != nil || resp.StatusCode != 200 {
								mu.Lock()
								errs++
								mu.Unlock()
								if resp != nil {
									resp.Body.Close()
								}
								continue
							}
							var out struct {
								Usage struct {
									CompletionTokens int `json:"completion_tokens"`
								} `json:"usage"`
							}
							decodeBody(resp, &out)
							mu.Lock()
							lat = append(lat, time.Since(t0))
							tokens += out.Usage.CompletionTokens
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				elapsed += time.Since(start) // requests started before the deadline finish after it
			}
			p1, r1 := srv.eng.Batching()
			slices.Sort(lat)
			secs := elapsed.Seconds()
			pct := func(q float64) float64 {
				if len(lat) == 0 {
					return 0
				}
				return lat[min(int(q*float64(len(lat))), len(lat)-1)].Seconds() * 1000
			}
			b.ReportMetric(float64(len(lat))/secs, "req/s")
			b.ReportMetric(float64(tokens)/secs, "tok/s")
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(r1-r0)/float64(max(p1-p0, 1)), "rows/pass")
			b.ReportMetric(float64(r1-r0)/secs, "rows/s")
			b.ReportMetric(float64(errs), "errors")
			time.Sleep(50 * time.Millisecond)
			b.ReportMetric(float64(srv.eng.BlocksInUse()), "kv-blocks-after")
		}
	}
}

func decodeBody(resp *http.Response, v any) {
	defer resp.Body.Close()
	jsonDecode(resp, v)
}

// startB is start for a benchmark.
func startB(b *testing.B, path string, cfg Config) (*Server, string) { return startTB(b, path, cfg) }
