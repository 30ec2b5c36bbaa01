package cpu

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/model/kernels"
)

// TestStaleDataNeverShows walks a pool whose free blocks and given-back
// slots hold NaN through reuse, forks, copies on write of staged and
// sealed blocks, truncates and refills: after every step each live
// position reads back exactly as last written, through ReadK/ReadV and
// the block views (storageStore.Check), and a masked attention over every
// sequence, reading each block's valid slots as the forward pass does,
// stays finite.
func TestStaleDataNeverShows(t *testing.T) {
	for _, dt := range []DType{F32, F16} {
		t.Run(dt.String(), func(t *testing.T) {
			p := newPool(t, Config{Layers: 2, KVDim: 4, HeadDim: 2, BlockSize: 4, DType: dt, MaxBlocks: 64})
			r := &staleRun{p: storageStore{p}}
			check := func(what string) {
				t.Helper()
				r.check(t)
				for i, m := range r.live {
					if err := maskedAttention(p, m.s); err != nil {
						t.Fatalf("%s: sequence %d: %v", what, i, err)
					}
				}
			}
			add := func(m *modelSeq, n int) {
				for range n {
					r.append(t, m)
					if pos := m.s.Len() - 1; (pos+1)%p.blockSize == 0 {
						sealAll(p, m.s, pos/p.blockSize) // as the forward pass does
					}
				}
			}
			truncate := func(m *modelSeq, n int) {
				t.Helper()
				for pos := n; pos < m.s.Len(); pos++ {
					if p.Owned(m.s, pos) {
						writeNaN(p, m.s, pos)
					}
				}
				if err := p.Truncate(m.s, n); err != nil {
					t.Fatal(err)
				}
				m.pos = m.pos[:n]
				poisonFree(p)
			}

			// Junk: NaN written everywhere, some blocks sealed, then freed.
			junk := p.NewSeq()
			for range 40 {
				writeNaN(p, junk, must(p.Append(junk)))
			}
			for b := range 10 {
				if b%2 == 0 {
					sealAll(p, junk, b)
				}
			}
			p.Free(junk)
			poisonFree(p)

			root := &modelSeq{s: p.NewSeq()}
			r.live = []*modelSeq{root}
			add(root, 10) // two sealed blocks and a partial one, all reused
			check("prompt on reused blocks")

			a := &modelSeq{s: p.Fork(root.s), pos: slices.Clone(root.pos)}
			b := &modelSeq{s: p.Fork(root.s), pos: slices.Clone(root.pos)}
			r.live = append(r.live, a, b)
			add(a, 1) // copy on write of the staged partial block
			check("copy of a staged block")

			truncate(b, 6) // into sealed block 1, still shared
			add(b, 1)      // copy on write of a sealed block
			if !p.KeySealed(b.s, 0, 1, 0) || p.Stats().CopyOnWrites != 2 {
				t.Fatalf("b's block 1: sealed %v, %+v", p.KeySealed(b.s, 0, 1, 0), p.Stats())
			}
			check("copy of a sealed block")

			truncate(a, 9) // gives back a slot of a's own block, now NaN
			add(a, 3)
			check("refill of a truncated slot")

			p.Free(root.s)
			r.live = r.live[1:]
			poisonFree(p)
			add(a, 13)
			add(b, 9)
			check("growth after the prompt was freed")

			truncate(b, 0) // every block of b released, NaN
			add(b, 11)
			c := &modelSeq{s: p.Fork(b.s), pos: slices.Clone(b.pos)}
			r.live = append(r.live, c)
			add(c, 6)
			add(b, 2)
			check("regrowth from empty")

			for _, m := range r.live {
				p.Free(m.s)
			}
			r.live = nil
			checkInvariants(t, p, nil)
		})
	}
}

// staleRun is the model of the live sequences: per position, the values
// last written there.
type staleRun struct {
	p    storageStore
	live []*modelSeq
	next float32
}

type modelSeq struct {
	s   *Seq
	pos [][]float32
}

// append appends a position to m and writes fresh values there, exact in
// binary16.
func (r *staleRun) append(t *testing.T, m *modelSeq) {
	t.Helper()
	pos, err := r.p.Append(m.s)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float32, r.p.layers*2*r.p.kvDim)
	for i := range vals {
		r.next++
		vals[i] = float32(int(r.next) % 2048)
	}
	r.p.Write(m.s, pos, vals)
	m.pos = append(m.pos, vals)
}

func (r *staleRun) check(t *testing.T) {
	t.Helper()
	live, want := make([]*Seq, len(r.live)), make([][][]float32, len(r.live))
	for i, m := range r.live {
		live[i], want[i] = m.s, m.pos
	}
	r.p.Check(t, live, want)
}

// sealAll seals every kv head of block i of s in every layer.
func sealAll(p *Pool, s *Seq, i int) {
	for l := range p.layers {
		for h := range p.heads {
			p.Seal(s, l, i, h)
		}
	}
}

// maskedAttention computes, for every layer and kv head of s, scores of a
// query against each block's valid slots and their weighted sum of
// values, as the forward pass reads the cache (scores of the slots a row
// sees, transposed keys or rows, values summed over those slots), and
// reports an error if any result is not finite.
func maskedAttention(p *Pool, s *Seq) error {
	hd, bs := p.headDim, p.blockSize
	q, y := make([]float32, hd), make([]float32, hd)
	for i := range q {
		q[i] = 1e-3
	}
	out := make([]float32, bs)
	for l := range p.layers {
		for h := range p.heads {
			clear(y)
			for b := range p.Blocks(s) {
				cnt := min(bs, s.Len()-b*bs)
				att := out[:cnt]
				sealed := p.KeySealed(s, l, b, h)
				if p.dtype == F16 {
					k := p.KeyBlockF16(s, l, b)[h*hd*bs : (h+1)*hd*bs]
					if sealed {
						kernels.ScoresTF16(att, q, k, bs)
					} else {
						kernels.ScoresRowsF16(att, q, k, hd)
					}
					kernels.Scale(att, 1e-3)
					kernels.AxpyStridedF16(y, att, p.ValueBlockF16(s, l, b)[h*hd*bs:], hd)
				} else {
					k := p.KeyBlock(s, l, b)[h*hd*bs : (h+1)*hd*bs]
					if sealed {
						kernels.ScoresT(att, q, k, bs)
					} else {
						kernels.ScoresRows(att, q, k, hd)
					}
					kernels.Scale(att, 1e-3)
					kernels.AxpyStrided(y, att, p.ValueBlock(s, l, b)[h*hd*bs:], hd)
				}
				for j, f := range att {
					if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
						return fmt.Errorf("layer %d head %d block %d slot %d: score %g", l, h, b, j, f)
					}
				}
			}
			for d, f := range y {
				if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
					return fmt.Errorf("layer %d head %d: weighted value %d is %g", l, h, d, f)
				}
			}
		}
	}
	return nil
}
