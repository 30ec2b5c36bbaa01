package serve

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

// BenchmarkServeLoad runs 1, 4, 16 and 64 concurrent clients for a
// bounded time against one server on loopback, each sending arith
// problems to beam-adaptive (276 rows, 4x greedy's answer), and reports
// requests/s, tokens/s, p50/p99 latency, forward rows per pass (the
// batching), errors (must be 0) and the KV blocks in use after the run
// (must be 0). requests/s at 16 clients over requests/s at 1 is what the
// batching across requests buys on this model.
//
//	go test ./cmd/internal/serve -run X -bench ServeLoad -benchtime 1x
func BenchmarkServeLoad(b *testing.B) {
	probs := []string{
		"Question: Fay has 75 eggs. She sells 67 eggs. She buys 4 bags with 9 eggs in each bag. How many eggs does Fay have now?\\nAnswer:",
		"Question: Ben has 31 cards. Then Ben doubles the cards. He sells 34 cards. How many cards does Ben have now?\\nAnswer:",
		"Question: Gus has 30 pens. He loses 22 pens. Then Gus doubles the pens. How many pens does Gus have now?\\nAnswer:",
		"Question: Ned has 55 cookies. He gives 30 cookies to Ray. He sells 24 cookies. How many cookies does Ned have now?\\nAnswer:",
	}
	for _, clients := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			srv, url := startB(b, filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), Config{MaxSearches: 64, Queue: 256})
			p0, r0 := srv.eng.Batching()
			var mu sync.Mutex
			var lat []time.Duration
			var tokens, errs int
			dur := 3 * time.Second
			for b.Loop() {
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
			}
			p1, r1 := srv.eng.Batching()
			slices.Sort(lat)
			secs := dur.Seconds() * float64(b.N)
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
			b.ReportMetric(float64(errs), "errors")
			time.Sleep(50 * time.Millisecond)
			b.ReportMetric(float64(srv.eng.BlocksInUse()), "kv-blocks-after")
		})
	}
}

func decodeBody(resp *http.Response, v any) {
	defer resp.Body.Close()
	jsonDecode(resp, v)
}

// startB is start for a benchmark.
func startB(b *testing.B, path string, cfg Config) (*Server, string) { return startTB(b, path, cfg) }
