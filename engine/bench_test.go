package engine

import (
	"context"
	"fmt"
	"sync"
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

// BenchmarkConcurrentSearches runs N beam-adaptive searches one after
// another and then all at once on one Engine, whose driver batches the
// concurrent ones into shared forward passes; compare the two ns/op (one
// op is all N searches) for the batching's gain. On stories260K the
// forward pass is tiny, so the gain here is a floor.
//
//	go test ./engine -run X -bench ConcurrentSearches
func BenchmarkConcurrentSearches(b *testing.B) {
	m := loadStories(b)
	for _, n := range []int{4, 16} {
		for _, concurrent := range []bool{false, true} {
			name := fmt.Sprintf("n=%d/sequential", n)
			if concurrent {
				name = fmt.Sprintf("n=%d/concurrent", n)
			}
			b.Run(name, func(b *testing.B) {
				e := newEngine(b, m, WithMode(BeamAdaptive), WithSeed(1), WithCacheTokens(1<<16))
				budget := Budget{MaxTokens: 64, MaxRows: 256}
				prompts := []string{"Once upon a time", "Lily wanted to", "The little dog", "Tom and his mom"}
				one := func(i int) {
					if _, err := e.Search(context.Background(), prompts[i%len(prompts)], budget); err != nil {
						b.Error(err)
					}
				}
				for b.Loop() {
					if !concurrent {
						for i := range n {
							one(i)
						}
						continue
					}
					var wg sync.WaitGroup
					for i := range n {
						wg.Go(func() { one(i) })
					}
					wg.Wait()
				}
				passes, rows := e.Batching()
				b.ReportMetric(float64(rows)/float64(max(passes, 1)), "rows/pass")
			})
		}
	}
}
