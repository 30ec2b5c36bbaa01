package model_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/kernels"
)

// TestStaleKVCacheIgnored: the KV pool does not clear blocks (a position
// holds stale data until the forward pass writes it), so the forward pass
// must read no slot it has not written. A tree of branches (a prompt
// prefilled in one batch, forks, truncates back into sealed and staged
// blocks, frees, every live branch advancing in one Forward a step) runs
// on a fresh pool and on one whose every block was first filled with NaN
// (written, sealed, freed), with NaN also written into each slot a
// Truncate gives back: the logits are bit for bit the same, and finite.
func TestStaleKVCacheIgnored(t *testing.T) {
	m := loadStories(t)
	c := &m.Config
	for _, dt := range kvTypes {
		for _, bs := range []int{4, 16} {
			for _, headDim := range []int{c.KVDim(), c.HeadDim} { // NewCache's one run per block, or one per kv head
				t.Run(fmt.Sprintf("kv-%v/block%d/headdim%d", dt, bs, headDim), func(t *testing.T) {
					newPool := func() *cpu.Cache {
						kv, err := kvcache.New(kvcache.Config{Layers: c.Layers, KVDim: c.KVDim(), HeadDim: headDim,
							BlockSize: bs, DType: dt, MaxBlocks: 1024 / bs})
						if err != nil {
							t.Fatal(err)
						}
						return cpu.NewCache(kv)
					}
					want, _ := staleTree(t, m, newPool(), false)
					stale := newPool()
					fillNaN(t, stale)
					got, masked := staleTree(t, m, stale, true)
					if masked == 0 {
						t.Fatal("no NaN next to the slots attention read: the test proves nothing")
					}
					t.Logf("%d of %d steps left NaN past a branch's length", masked, 6*bs)
					if len(got) != len(want) {
						t.Fatalf("%d logit rows, want %d", len(got), len(want))
					}
					for i := range want {
						for j, w := range want[i] {
							if math.IsNaN(float64(w)) || math.IsInf(float64(w), 0) || got[i][j] != w {
								t.Fatalf("logit row %d, token %d: %g on the stale pool, %g on the fresh one", i, j, got[i][j], w)
							}
						}
					}
				})
			}
		}
	}
}

// fillNaN writes NaN keys and values into every position of every block
// kv can hold, seals every block, and frees them all.
func fillNaN(t *testing.T, kv *cpu.Cache) {
	t.Helper()
	cfg := kv.Config()
	nan := make([]float32, cfg.KVDim)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	s := kv.NewSeq()
	for {
		pos, err := kv.Append(s)
		if errors.Is(err, kvcache.ErrCacheFull) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for l := range cfg.Layers {
			kv.WriteKV(s, l, pos, nan, nan)
			if (pos+1)%cfg.BlockSize == 0 {
				for h := range cfg.KVDim / cfg.HeadDim {
					kv.Seal(s, l, pos/cfg.BlockSize, h)
				}
			}
		}
	}
	if st := kv.Stats(); st.FreeBlocks != 0 {
		t.Fatalf("pool not filled: %+v", st)
	}
	kv.Free(s)
}

// staleTree grows a random tree (the same for a given model and block
// size) on kv and returns the logits of every row it ran, in order, and
// how many steps found NaN values in a live branch's last block, past its
// length, after the Forward: in the slots attention must mask. With
// poison, each slot a Truncate gives back is first overwritten with NaN
// where the branch owns it.
func staleTree(t *testing.T, m *model.Model, kv *cpu.Cache, poison bool) (logits [][]float32, masked int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, uint64(kv.BlockSize())))
	r := cpu.NewRunner(m, kv)
	cfg := kv.Config()
	nan := make([]float32, cfg.KVDim)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	keep := func(o *model.Output, i int) { logits = append(logits, append([]float32(nil), o.Logits(i)...)) }

	bs := kv.BlockSize()
	root := kv.NewSeq()
	rows := make([]model.Row, 2*bs+3)
	for i := range rows {
		rows[i] = model.Row{Seq: root, Token: rng.IntN(m.Config.Vocab), NoLogits: i < len(rows)-2}
	}
	out, err := r.Forward(rows)
	if err != nil {
		t.Fatal(err)
	}
	keep(out, len(rows)-2)
	keep(out, len(rows)-1)

	live := []*kvcache.Seq{root}
	truncate := func(s *kvcache.Seq, n int) {
		if poison {
			for pos := n; pos < s.Len(); pos++ {
				if kv.Owned(s, pos) {
					for l := range cfg.Layers {
						kv.WriteKV(s, l, pos, nan, nan)
					}
				}
			}
		}
		if err := kv.Truncate(s, n); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 6 * bs {
		if len(live) < 8 && rng.IntN(3) == 0 {
			live = append(live, kv.Fork(live[rng.IntN(len(live))]))
		}
		if rng.IntN(3) == 0 { // back into its own blocks, or the shared prompt's
			s := live[rng.IntN(len(live))]
			truncate(s, max(1, s.Len()-1-rng.IntN(bs+2)))
		}
		if len(live) > 2 && rng.IntN(6) == 0 {
			i := rng.IntN(len(live))
			kv.Free(live[i])
			live = append(live[:i], live[i+1:]...)
		}
		rows = rows[:0]
		for _, s := range live {
			rows = append(rows, model.Row{Seq: s, Token: rng.IntN(m.Config.Vocab)})
		}
		out, err := r.Forward(rows)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for i := range rows {
			keep(out, i)
		}
		if staleAfter(kv, live) {
			masked++
		}
	}
	for _, s := range live {
		kv.Free(s)
	}
	return logits, masked
}

// staleAfter reports whether the values of some sequence's last block
// hold a NaN in a slot past the sequence's length.
func staleAfter(kv *cpu.Cache, live []*kvcache.Seq) bool {
	cfg := kv.Config()
	bs, hd := cfg.BlockSize, cfg.HeadDim
	isNaN := func(f float32) bool { return math.IsNaN(float64(f)) }
	for _, s := range live {
		b := kv.Blocks(s) - 1
		for l := range cfg.Layers {
			vals := make([]float32, bs*cfg.KVDim) // [kv head][slot][HeadDim]
			if kv.DType() == kvcache.F16 {
				kernels.FromHalf(vals, kv.ValueBlockF16(s, l, b))
			} else {
				copy(vals, kv.ValueBlock(s, l, b))
			}
			for h := range cfg.KVDim / hd {
				for j := s.Len() - b*bs; j < bs; j++ {
					if slices.ContainsFunc(vals[(h*bs+j)*hd:][:hd], isNaN) {
						return true
					}
				}
			}
		}
	}
	return false
}
