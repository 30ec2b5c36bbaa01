package ggml_test

import (
	"math"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/policy"
)

// TestAttentionSums checks the attention's sums made on the device (as on
// a GPU: model.AttentionSums) against its scores and probabilities read
// back: the metrics policy makes of each agree within float32 rounding,
// on treeSteps' tree, group by group and in a batch, with and without
// flash attention, on ggml's CPU device.
func TestAttentionSums(t *testing.T) {
	options(t)
	m := loadStories(t)
	attn := []int{m.Config.Layers - 1}
	for _, way := range []string{"auto", "gpu", "gpu-batch", "gpu-noflash", "gpu-batch-noflash"} {
		t.Run(way, func(t *testing.T) {
			full, sums := newBackend(t, m, 256, 4, kvcache.F32), newBackend(t, m, 256, 4, kvcache.F32)
			ggml.SetAttention(full, way)
			ggml.SetAttention(sums, way)
			ggml.SetAttentionSums(sums, true)
			var want, got []policy.AttentionMetrics
			treeWalk(t, full, m.Config.Vocab, attn, func(out *model.Output, rows []model.Row) {
				for i, r := range rows {
					if r.NoLogits {
						continue
					}
					a := out.Attention(i, 0)
					mt, err := policy.MeasureAttention(policy.Attention{Heads: a.Heads, Len: a.Len, Scores: a.Scores, Probs: a.Probs})
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, mt)
				}
			})
			treeWalk(t, sums, m.Config.Vocab, attn, func(out *model.Output, rows []model.Row) {
				for i, r := range rows {
					if r.NoLogits {
						continue
					}
					if a := out.Attention(i, 0); a.Heads != 0 {
						t.Fatalf("row %d: attention rows as well as sums", i)
					}
					a, ok := out.AttentionSums(i, 0)
					if !ok || a.Len != out.Pos[i]+1 {
						t.Fatalf("row %d at position %d: sums %v of %d positions", i, out.Pos[i], ok, a.Len)
					}
					mt, err := policy.MeasureAttentionSums(policy.AttentionSums{Heads: a.Heads, Len: a.Len, Entropy: a.Entropy, AbsScores: a.AbsScores, Disagreement: a.Disagreement})
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, mt)
				}
			})
			if len(got) != len(want) || len(got) == 0 {
				t.Fatalf("%d rows of sums, %d of attention", len(got), len(want))
			}
			worst := 0.0
			for i := range want {
				d := metricsDiff(got[i], want[i])
				if !(d <= 1e-4) {
					t.Fatalf("row %d: %+v from the sums, %+v from the attention", i, got[i], want[i])
				}
				worst = max(worst, d)
			}
			t.Logf("%d rows: the metrics of the sums within %.2g (relative) of the attention's", len(got), worst)
		})
	}
}

// keepSums appends the metrics of the attention's sums of out's rows with
// logits, per row and layer (of nattn), when out has them.
func keepSums(t *testing.T, out *model.Output, rows []model.Row, nattn int, sums []policy.AttentionMetrics) []policy.AttentionMetrics {
	t.Helper()
	for i, r := range rows {
		if r.NoLogits {
			continue
		}
		for j := range nattn {
			a, ok := out.AttentionSums(i, j)
			if !ok {
				return sums
			}
			mt, err := policy.MeasureAttentionSums(policy.AttentionSums{Heads: a.Heads, Len: a.Len, Entropy: a.Entropy, AbsScores: a.AbsScores, Disagreement: a.Disagreement})
			if err != nil {
				t.Fatal(err)
			}
			sums = append(sums, mt)
		}
	}
	return sums
}

// TestAttentionSumsChunked is TestAttentionSums on chunkSteps' steps (two
// layers asked, rows without logits among them), in chunks of 7 rows and
// in chunks of 16 as on a GPU.
func TestAttentionSumsChunked(t *testing.T) {
	options(t)
	m := loadStories(t)
	attn := []int{0, m.Config.Layers - 1}
	_, _, att, _ := chunkSteps(t, chunkedBackend(t, m, 0), m.Config.Vocab, attn)
	var want []policy.AttentionMetrics
	for _, a := range att {
		mt, err := policy.MeasureAttention(policy.Attention{Heads: a.Heads, Len: a.Len, Scores: a.Scores, Probs: a.Probs})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, mt)
	}
	for _, chunk := range []int{7, -16} {
		b := chunkedBackend(t, m, max(chunk, -chunk))
		if chunk < 0 {
			ggml.SetAttention(b, "gpu-batch")
		}
		ggml.SetAttentionSums(b, true)
		_, _, _, got := chunkSteps(t, b, m.Config.Vocab, attn)
		if len(got) != len(want) || len(got) == 0 {
			t.Fatalf("chunk %d: %d rows and layers of sums, %d of attention", chunk, len(got), len(want))
		}
		for i := range want {
			if d := metricsDiff(got[i], want[i]); !(d <= 1e-4) {
				t.Fatalf("chunk %d, row and layer %d: %+v from the sums, %+v from the attention", chunk, i, got[i], want[i])
			}
		}
	}
}

// metricsDiff is the largest difference of two measurements' metrics,
// relative to want's (to 1e-3 at least).
func metricsDiff(got, want policy.AttentionMetrics) float64 {
	d := 0.0
	for _, pair := range [][2]float64{{got.Entropy, want.Entropy}, {got.Varentropy, want.Varentropy},
		{got.Agreement, want.Agreement}, {got.Interaction, want.Interaction}} {
		d = max(d, math.Abs(pair[0]-pair[1])/max(1e-3, math.Abs(pair[1])))
	}
	return d
}
