package engine

import (
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
)

// scripted is a model.Backend with no model behind it: the logits of a row
// are a fixed function of the row's position and token (scriptLogits), and
// its attention is uniform. It drives the engine through the seam alone:
// the block manager's appends, forks and frees, the copies it queues, the
// Output's logits rows and attention, as a GPU backend would see them.
type scripted struct {
	vocab, heads, eos int
	kv                *kvcache.Pool
	out               model.Output
	ctx               int
	passes, rows      int
	copied            int // copies on write the manager queued
	copies            []kvcache.Copy
	closes            int // Close calls
}

func init() {
	model.RegisterBackend("scripted", func(m *model.Model, c model.CacheConfig) (model.Backend, error) {
		kv, err := m.NewCache(c.Tokens, c.BlockSize, c.DType)
		if err != nil {
			return nil, err
		}
		b := &scripted{vocab: m.Config.Vocab, heads: m.Config.Heads, eos: m.Tokenizer.EOS(), kv: kv, ctx: m.Config.ContextLen}
		lastScripted = b
		madeScripted = append(madeScripted, b)
		return b, nil
	})
}

// lastScripted is the backend the last engine made (the tests run one
// engine at a time), madeScripted every one made, in order.
var (
	lastScripted *scripted
	madeScripted []*scripted
)

func (b *scripted) Cache() *kvcache.Pool { return b.kv }
func (b *scripted) Close() error         { b.closes++; return nil }

func (b *scripted) Forward(rows []model.Row, attnLayers ...int) (*model.Output, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	var err error
	b.out.Pos, err = model.AppendRows(b.kv, rows, b.ctx, b.out.Pos)
	b.copies = b.kv.TakeCopies(b.copies[:0]) // nothing to copy: no storage
	b.copied += len(b.copies)
	if err != nil {
		return nil, err
	}
	b.passes++
	b.rows += len(rows)
	b.out.Prepare(rows, b.vocab, b.heads, attnLayers)
	logits := b.out.LogitsBuffer()
	nl := 0
	for i, row := range rows {
		if row.NoLogits {
			continue
		}
		scriptLogits(logits[nl*b.vocab:(nl+1)*b.vocab], b.out.Pos[i], row.Token, b.eos)
		nl++
		for l := range attnLayers {
			off := b.out.AttentionOffset(i, l)
			n := b.out.Pos[i] + 1
			att := b.out.AttentionBuffer()[off : off+2*b.heads*n]
			for j := range att[:b.heads*n] {
				att[j] = 0 // scores
			}
			for j := range att[b.heads*n:] {
				att[b.heads*n+j] = 1 / float32(n) // probabilities
			}
		}
	}
	return &b.out, nil
}

// scriptLogits writes the script's logits for token tok at position pos:
// mostly a clear favourite among a few candidates, every fifth position a
// near tie among several (where the branching modes fork), and the end of
// text likely from position 40.
func scriptLogits(out []float32, pos, tok, eos int) {
	h := uint64(pos)*0x9e3779b97f4a7c15 ^ uint64(tok)*0xbf58476d1ce4e5b9
	next := func() uint64 {
		h ^= h >> 31
		h *= 0x94d049bb133111eb
		h ^= h >> 29
		return h
	}
	for j := range out {
		out[j] = -8 - float32(next()%1000)/1000
	}
	cands, spread := 3, float32(4)
	if pos%5 == 0 {
		cands, spread = 8, 0.5
	}
	for c := range cands {
		j := 3 + int(next()%uint64(len(out)-3)) // not BOS/EOS/unknown
		out[j] = spread * float32(cands-c) / float32(cands)
	}
	if pos >= 40 {
		out[eos] = spread + 1
	}
}

// TestScriptedBackendEveryMode runs every mode over the scripted backend:
// each finishes, frees every block, and gives the same result twice;
// greedy follows the script's argmax exactly.
func TestScriptedBackendEveryMode(t *testing.T) {
	m := loadStories(t)
	prompt := "Once upon a time"
	for mode := range Mode(len(modeNames)) {
		t.Run(mode.String(), func(t *testing.T) {
			var texts []string
			for range 2 {
				e := newEngine(t, m, WithBackend("scripted"), WithMode(mode), WithWidth(3), WithSeed(7))
				b := lastScripted
				res := runSearch(t, e, prompt, Budget{MaxTokens: 48})
				if b.passes == 0 || len(res.Tokens) == 0 || res.Tree == nil || res.Tree.Len() < 2 {
					t.Fatalf("%d passes, %d tokens, tree %v", b.passes, len(res.Tokens), res.Tree != nil)
				}
				if res.Stats.ForwardPasses != b.passes || res.Stats.Rows+res.Stats.PromptRows != b.rows {
					t.Errorf("stats %+v, backend %d passes of %d rows", res.Stats, b.passes, b.rows)
				}
				texts = append(texts, res.Text)
				if mode == Greedy {
					toks := m.Tokenizer.Encode(prompt, true)
					logits := make([]float32, m.Config.Vocab)
					var want []int
					for range res.Tokens {
						scriptLogits(logits, len(toks)-1, toks[len(toks)-1], m.Tokenizer.EOS())
						best := 0
						for j, f := range logits {
							if f > logits[best] {
								best = j
							}
						}
						want = append(want, best)
						toks = append(toks, best)
					}
					if !slices.Equal(res.Tokens, want) {
						t.Errorf("greedy tokens %v, the script's argmax %v", res.Tokens, want)
					}
				}
				t.Logf("%s: %d tokens, %d passes, %d rows, %d copies on write, %d nodes, stopped %q", mode, len(res.Tokens), b.passes, b.rows, b.copied, res.Tree.Len(), res.Stopped)
			}
			if texts[0] != texts[1] {
				t.Errorf("two runs differ: %q, %q", texts[0], texts[1])
			}
		})
	}
	if _, err := New(m, WithBackend("nonesuch")); err == nil {
		t.Error("an unregistered backend made an engine")
	}
}
