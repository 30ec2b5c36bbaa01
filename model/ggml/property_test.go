package ggml_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// liveSeq is a sequence of the test and the tokens it holds.
type liveSeq struct {
	s    *kvcache.Seq
	toks []int
}

// kvRun drives a ggml backend's cache through random operations — new
// sequences, forks, steps appending one or more tokens to several
// sequences at once (copies on write included), truncations (a search's
// backspace) and frees — and checks every logits row a step returns
// against the same tokens run alone from scratch on another backend.
type kvRun struct {
	t      *testing.T
	r      *rand.Rand
	m      *model.Model
	b      *ggml.Backend // under test: a small pool, small blocks
	fresh  *ggml.Backend // the oracle: one sequence at a time
	live   []*liveSeq
	tol    float64
	worst  float64
	counts map[string]int
}

func (k *kvRun) pick() *liveSeq { return k.live[k.r.IntN(len(k.live))] }

// recompute returns the logits after toks, run alone in one step.
func (k *kvRun) recompute(toks []int) []float32 {
	p := k.fresh.Cache()
	s := p.NewSeq()
	defer p.Free(s)
	rows := make([]model.Row, len(toks))
	for i, tok := range toks {
		rows[i] = model.Row{Seq: s, Token: tok, NoLogits: i < len(toks)-1}
	}
	out, err := k.fresh.Forward(rows)
	if err != nil {
		k.t.Fatal(err)
	}
	return slices.Clone(out.Logits(len(toks) - 1))
}

func (k *kvRun) op() {
	t, r, p := k.t, k.r, k.b.Cache()
	if len(k.live) == 0 {
		k.live = append(k.live, &liveSeq{s: p.NewSeq()})
	}
	switch o := r.IntN(100); {
	case o < 8 && len(k.live) < 12:
		k.live = append(k.live, &liveSeq{s: p.NewSeq()})
		k.counts["new"]++
	case o < 25 && len(k.live) < 12:
		a := k.pick()
		k.live = append(k.live, &liveSeq{s: p.Fork(a.s), toks: slices.Clone(a.toks)})
		k.counts["fork"]++
	case o < 35:
		a := k.pick()
		n := len(a.toks) - r.IntN(min(len(a.toks), 6)+1) // a backspace of a few tokens
		if r.IntN(4) == 0 {
			n = r.IntN(len(a.toks) + 1)
		}
		if err := p.Truncate(a.s, n); err != nil {
			t.Fatal(err)
		}
		a.toks = a.toks[:n]
		k.counts["truncate"]++
	case o < 42 && len(k.live) > 1:
		i := r.IntN(len(k.live))
		p.Free(k.live[i].s)
		k.live = slices.Delete(k.live, i, i+1)
		k.counts["free"]++
	default:
		k.step()
	}
}

// step appends one to three tokens to some of the live sequences in one
// Forward, asks for the logits of some rows, and checks them.
func (k *kvRun) step() {
	t, r, p := k.t, k.r, k.b.Cache()
	var rows []model.Row
	type want struct {
		seq  *liveSeq
		toks []int
	}
	var wants []want
	before := p.Stats()
	for _, a := range k.live {
		if r.IntN(3) == 0 || len(a.toks) > 40 {
			continue
		}
		toks := slices.Clone(a.toks)
		for range 1 + r.IntN(3) {
			tok := r.IntN(k.m.Config.Vocab)
			toks = append(toks, tok)
			logits := r.IntN(2) == 0
			rows = append(rows, model.Row{Seq: a.s, Token: tok, NoLogits: !logits})
			wants = append(wants, want{a, slices.Clone(toks)})
		}
	}
	if len(rows) == 0 {
		return
	}
	lens := make([]int, len(k.live))
	for i, a := range k.live {
		lens[i] = a.s.Len()
	}
	out, err := k.b.Forward(rows)
	if errors.Is(err, kvcache.ErrCacheFull) {
		for i, a := range k.live {
			if a.s.Len() != lens[i] {
				t.Fatalf("a full cache changed sequence %d: %d positions, had %d", i, a.s.Len(), lens[i])
			}
		}
		// A sequence keeps a block copied on write by an append rolled
		// back: that copy is still to be made, in the next step's graph.
		st := p.Stats()
		if st.BlocksInUse-before.BlocksInUse > int(st.CopyOnWrites-before.CopyOnWrites) {
			t.Fatalf("a full cache kept blocks: %d in use, had %d", st.BlocksInUse, before.BlocksInUse)
		}
		if st.CopyOnWrites > before.CopyOnWrites {
			k.counts["copy-left-pending"]++
		}
		k.counts["full"]++
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	k.counts["step"]++
	k.counts["rows"] += len(rows)
	for i, w := range wants {
		w.seq.toks = w.toks // the last row of a sequence leaves its tokens
		if rows[i].NoLogits {
			continue
		}
		got, ref := out.Logits(i), k.recompute(w.toks)
		d := spreadDiff(got, ref)
		if !(d <= k.tol) {
			t.Fatalf("row %d (%d tokens): logits %.3g of the spread from a fresh recompute (tolerance %g)", i, len(w.toks), d, k.tol)
		}
		k.worst = max(k.worst, d)
		k.counts["checked"]++
	}
	for _, a := range k.live {
		if a.s.Len() != len(a.toks) {
			t.Fatalf("sequence of %d positions holds %d tokens", a.s.Len(), len(a.toks))
		}
	}
}

// TestDeviceKVProperty runs random operation sequences on the device's
// cache, in both element types and several block sizes, the attention
// groups reading their blocks as the backend chooses and one other way
// each (ggml.SetAttention's, in turn: each way in both element types),
// against fresh recomputes, and checks that freeing everything leaves no
// block in use.
func TestDeviceKVProperty(t *testing.T) {
	options(t)
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "stories260K.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ops := 100
	if testing.Short() {
		ops = 40
	}
	turn := 0
	for _, dt := range []kvcache.ElemType{kvcache.F32, kvcache.F16} {
		for _, bs := range []int{1, 3, 4, 16} {
			turn++
			for _, way := range []string{"auto", attentionWays[1+turn%(len(attentionWays)-1)]} {
				t.Run(fmt.Sprintf("kv-%v/block%d/%s", dt, bs, way), func(t *testing.T) {
					k := &kvRun{t: t, r: rand.New(rand.NewPCG(uint64(bs), uint64(dt))), m: m,
						b: newBackend(t, m, 320, bs, dt), fresh: newBackend(t, m, 256, 8, dt),
						tol: 1e-4, counts: map[string]int{}}
					ggml.SetAttention(k.b, way)
					if dt == kvcache.F16 {
						k.tol = 2e-3 // the recompute rounds the same keys and values, but its products group differently
					}
					for range ops {
						k.op()
					}
					p := k.b.Cache()
					st := p.Stats()
					for _, a := range k.live {
						p.Free(a.s)
					}
					if st := p.Stats(); st.BlocksInUse != 0 || st.LogicalBlocks != 0 {
						t.Fatalf("blocks leaked: %+v", st)
					}
					t.Logf("%v; %d copies on write; largest difference %.2g of the logit spread", k.counts, st.CopyOnWrites, k.worst)
					if k.counts["checked"] < 20 || k.counts["fork"] == 0 ||
						!testing.Short() && (st.CopyOnWrites == 0 && bs > 1 || k.counts["truncate"] == 0) {
						t.Errorf("the operations barely exercised the cache: %v, %d copies on write", k.counts, st.CopyOnWrites)
					}
					sp := k.b.Spans()
					t.Logf("attention: %d groups, read %d slots of spans of %d, blocks of %d", sp.Groups, sp.Read, sp.Span, sp.Used)
				})
			}
		}
	}
}
