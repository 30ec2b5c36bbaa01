package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/entropix-search/entropix-search/policy"
)

// BenchmarkSearchOverhead measures the share of a search's time spent
// outside the forward pass (policy, tree, bookkeeping) at 1, 16 and 64
// live branches, for beam search (exactly K live) and for beam-adaptive
// forced to fork at every step. On stories260K the forward pass is tiny,
// so this is the worst case for the share.
//
//	go test ./engine -run X -bench SearchOverhead
func BenchmarkSearchOverhead(b *testing.B) {
	m := loadStories(b)
	for _, w := range []int{1, 16, 64} {
		for _, mode := range []Mode{Beam, BeamAdaptive} {
			b.Run(fmt.Sprintf("%s/width=%d", mode, w), func(b *testing.B) {
				opts := []Option{WithMode(mode), WithWidth(w), WithSeed(1)}
				if mode == BeamAdaptive {
					opts = append(opts, WithPolicy(policy.ForcedForks(policy.DefaultConfig())))
				}
				e := newEngine(b, m, opts...)
				budget := Budget{MaxTokens: 64, MaxWidth: w}
				var wall, fwd, rows, live float64
				for b.Loop() {
					res, err := e.Search(context.Background(), "Once upon a time", budget)
					if err != nil {
						b.Fatal(err)
					}
					wall += res.Stats.Wall.Seconds()
					fwd += res.Stats.ForwardTime.Seconds()
					rows += float64(res.Stats.Rows)
					live += float64(res.Stats.Rows) / float64(max(res.Stats.ForwardPasses-1, 1))
				}
				b.ReportMetric(100*(1-fwd/wall), "%outside-forward")
				b.ReportMetric(live/float64(b.N), "live/step")
				b.ReportMetric(1e6*(wall-fwd)/rows, "µs-overhead/row")
			})
		}
	}
}
