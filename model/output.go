package model

import (
	"errors"
	"sync"

	"github.com/entropix-search/entropix-search/kvcache"
)

// Row is one token to feed: the next token of sequence Seq. It is written
// at position Seq.Len() (the cache grows by one).
type Row struct {
	Seq   *kvcache.Seq
	Token int
	// NoLogits skips the classifier for this row, e.g. for the prompt
	// positions of a prefill whose predictions nobody reads.
	NoLogits bool
}

// Attention is one row's attention in one layer: for each head, the
// pre-softmax scores q·k/sqrt(headDim) and the probabilities over the
// positions 0..Len-1 the sequence really has, head-major (Heads x Len).
type Attention struct {
	Heads, Len    int
	Scores, Probs []float32
}

// AttentionSums are one row's attention in one layer summed where it was
// computed (a GPU's memory), in place of its scores and probabilities:
// what the attention metrics are made of (policy.MeasureAttentionSums).
// Over the positions 0..Len-1 the sequence has:
type AttentionSums struct {
	Heads, Len int
	// Entropy is each head's entropy of its probabilities, -Σ P log P
	// (nats), Heads long.
	Entropy []float32
	// AbsScores is each head's Σ |score|, Heads long.
	AbsScores []float32
	// Disagreement is Σ over positions and heads of |P - the heads' mean
	// P at that position|.
	Disagreement float32
}

// Output is the result of a forward step. Its slices belong to the
// backend and are valid until its next Forward call, but for the rows of
// Logits: those stay valid one call longer, until the second successful
// Forward after the one that returned them (a search keeps the row that
// chose a token, for taking the token back at the next step, without a
// copy).
//
// A backend fills it through Prepare, then LogitsBuffer (every row with
// logits, vocabulary-wide), AttentionBuffer and AttentionOffset. A backend
// whose rows live elsewhere (a GPU's memory) may instead compute each
// row's statistics there and hand over only those (StatsBuffer: the
// normalizer's sums, the argmax, the top K), with a function that copies a
// whole row to the host when a reader asks for it (FetchLogits): the
// search then reads the statistics where they suffice (greedy steps, beams,
// forks) and fetches a row only where a mode needs it (a sampler's draw).
// Such a backend must:
//
//   - fill every field of every RowStats of the step, exactly as
//     RowStatsOf defines them (the search's decisions are then the same as
//     from the row; RowStatsOf is the oracle to test against), for every
//     row with logits or for none;
//   - keep each step's logits, and its fetch function working, until the
//     second successful Forward after the step (a step's rows outlive the
//     next one: double-buffer them on the device);
//   - copy the row it is asked for, without failing (a device whose copy
//     can fail must report that at its next Forward), never during a
//     Forward. The Output calls the function at most once per row, one
//     call at a time, from any goroutine.
//
// Likewise, where the attention asked for is computed elsewhere, a
// backend may hand over each row's attention summed into what the
// attention metrics are made of (AttentionSumsBuffer) instead of its
// scores and probabilities, every row with logits and every layer asked.
//
// The CPU backend fills the rows and the attention, and gives no
// statistics.
type Output struct {
	Pos []int // the position each row was written at

	vocab      int
	logits     []float32 // packed, one vocab-sized row per row with logits
	logitIndex []int     // row -> index into logits, or -1
	// spare is the logits buffer of the step before the last: the next
	// Prepare writes there.
	spare []float32
	// lazy fetches the step's rows on first use (nil: the backend filled
	// them); mu serializes the fetches of this step's and the last one's.
	lazy *lazyRows
	mu   sync.Mutex

	// stats are the rows' statistics (nil: none), one per row with
	// logits; statsTop and statsTopLogits hold their Top and TopLogits.
	stats          []RowStats
	statsBuf       []RowStats
	statsTop       []int32
	statsTopLogits []float32

	heads      int
	attnLayers []int
	attnOff    []int     // row*len(attnLayers)+i -> offset into attn
	attn       []float32 // per row and layer: scores then probabilities, Heads x (Pos+1) each
	// sums, when set, are the rows' attention sums in place of attn: per
	// row with logits and of sumLayers layers, 2*Heads+1 floats
	// (AttentionSumsBuffer).
	sums      []float32
	sumsBuf   []float32
	sumLayers int
}

// ErrContextFull is returned when a row would be written past the model's
// context length.
var ErrContextFull = errors.New("model: context length exceeded")

// Logits returns row r's next-token logits (nil for a NoLogits row),
// fetching the row from the backend on first use when it is lazy
// (FetchLogits). It is safe to call from several goroutines at once.
func (o *Output) Logits(r int) []float32 {
	i := o.logitIndex[r]
	if i < 0 {
		return nil
	}
	if o.lazy != nil {
		return o.lazy.row(i)
	}
	return o.logits[i*o.vocab : (i+1)*o.vocab]
}

// LogitsLater returns a function that gives Logits(r) of this step,
// callable until the second successful Forward after it (the row's
// lifetime, see Output): a lazy row is fetched only if it is called.
func (o *Output) LogitsLater(r int) func() []float32 {
	i := o.logitIndex[r]
	switch {
	case i < 0:
		return func() []float32 { return nil }
	case o.lazy != nil:
		l := o.lazy
		return func() []float32 { return l.row(i) }
	}
	row := o.logits[i*o.vocab : (i+1)*o.vocab]
	return func() []float32 { return row }
}

// Stats returns row r's statistics, or nil when the backend gave none (or
// r is a NoLogits row). They are valid until the next Forward.
func (o *Output) Stats(r int) *RowStats {
	i := o.logitIndex[r]
	if o.stats == nil || i < 0 {
		return nil
	}
	return &o.stats[i]
}

// Attention returns row r's attention in the i-th of the layers asked for
// (the zero value when no attention was asked for, for a NoLogits row, or
// when the backend gave AttentionSums instead).
func (o *Output) Attention(r, i int) Attention {
	if i < 0 || i >= len(o.attnLayers) {
		return Attention{}
	}
	n := o.Pos[r] + 1
	off := o.attnOff[r*len(o.attnLayers)+i]
	if off < 0 {
		return Attention{}
	}
	h := o.heads
	return Attention{Heads: h, Len: n, Scores: o.attn[off : off+h*n], Probs: o.attn[off+h*n : off+2*h*n]}
}

// AttentionSums returns row r's attention sums in the i-th of the layers
// asked for, and whether the backend gave them (AttentionSumsBuffer) for
// this row. They are valid until the next Forward.
func (o *Output) AttentionSums(r, i int) (AttentionSums, bool) {
	k := o.logitIndex[r]
	if o.sums == nil || k < 0 || i < 0 || i >= o.sumLayers {
		return AttentionSums{}, false
	}
	h := o.heads
	w := o.sums[(k*o.sumLayers+i)*(2*h+1):][:2*h+1]
	return AttentionSums{Heads: h, Len: o.Pos[r] + 1, Entropy: w[:h], AbsScores: w[h : 2*h], Disagreement: w[2*h]}, true
}

// AttentionSumsBuffer gives the step's attention in the layers asked for
// (layers of them) as sums (AttentionSums; Attention then gives nothing)
// and returns them for the backend to write: per row with logits, in row
// order, and per layer, the heads' entropies (Heads floats), their
// Σ |score| (Heads), then the disagreement. Call it after a Prepare that
// was given no attention layers (no room for the scores and
// probabilities).
func (o *Output) AttentionSumsBuffer(layers int) []float32 {
	nl := len(o.logits) / max(o.vocab, 1)
	o.sumsBuf = grow(o.sumsBuf, nl*layers*(2*o.heads+1))
	o.sums, o.sumLayers = o.sumsBuf, layers
	return o.sums
}

// Prepare sizes o's logits and attention buffers for a step of rows at
// positions o.Pos (set first), with vocab-wide logits and attention of
// heads heads in attnLayers. A backend calls it once the step cannot fail:
// the last step's logits stay as they are, this step's go over the
// buffer of the step before.
func (o *Output) Prepare(rows []Row, vocab, heads int, attnLayers []int) {
	o.vocab, o.heads = vocab, heads
	o.logitIndex = o.logitIndex[:0]
	nl := 0
	for _, row := range rows {
		if row.NoLogits {
			o.logitIndex = append(o.logitIndex, -1)
			continue
		}
		o.logitIndex = append(o.logitIndex, nl)
		nl++
	}
	o.logits, o.spare = o.spare, o.logits
	o.logits = grow(o.logits, nl*vocab)
	o.lazy, o.stats, o.sums, o.sumLayers = nil, nil, nil, 0

	// Attention is kept only for rows with logits: a prefill's other rows
	// would cost O(prompt²) memory for nothing.
	o.attnLayers = append(o.attnLayers[:0], attnLayers...)
	o.attnOff = o.attnOff[:0]
	total := 0
	for i, row := range rows {
		for range attnLayers {
			if row.NoLogits {
				o.attnOff = append(o.attnOff, -1)
				continue
			}
			o.attnOff = append(o.attnOff, total)
			total += 2 * heads * (o.Pos[i] + 1)
		}
	}
	o.attn = grow(o.attn, total)
}

// LogitsBuffer is the step's logits, one vocab-wide row per row with
// logits, packed in row order: what a backend writes.
func (o *Output) LogitsBuffer() []float32 { return o.logits }

// StatsBuffer turns on the step's row statistics and returns them, one
// per row with logits, packed in row order as LogitsBuffer, each with a
// Top and TopLogits k long: what a backend writes, every field. Call it
// after Prepare. (A k of 64 gives every fork of the policy, whose width is
// at most 64, and every beam and --n-probs up to 64, without a row.)
func (o *Output) StatsBuffer(k int) []RowStats {
	nl := len(o.logits) / max(o.vocab, 1)
	if cap(o.statsBuf) < nl {
		o.statsBuf = make([]RowStats, nl)
	}
	o.stats = o.statsBuf[:nl]
	if cap(o.statsTop) < nl*k {
		o.statsTop, o.statsTopLogits = make([]int32, nl*k), make([]float32, nl*k)
	}
	for i := range o.stats {
		j := i * k
		o.stats[i] = RowStats{Top: o.statsTop[j : j+k : j+k], TopLogits: o.statsTopLogits[j : j+k : j+k]}
	}
	return o.stats
}

// LogitsFetch copies the i-th row with logits of a step (in LogitsBuffer's
// order) to dst, vocabulary-wide.
type LogitsFetch func(i int, dst []float32)

// FetchLogits makes the step's logits rows lazy: the backend does not fill
// LogitsBuffer, and Logits(r) calls fetch for row r on its first use, into
// the row's place in LogitsBuffer. Call it after Prepare; see Output for
// what fetch must do.
func (o *Output) FetchLogits(fetch LogitsFetch) {
	nl := len(o.logits) / max(o.vocab, 1)
	o.lazy = &lazyRows{mu: &o.mu, fetch: fetch, buf: o.logits, vocab: o.vocab, done: make([]bool, nl)}
}

// lazyRows are one step's logits rows, fetched on first use.
type lazyRows struct {
	mu    *sync.Mutex // the Output's: one fetch at a time
	fetch LogitsFetch
	buf   []float32 // the step's logits buffer
	vocab int
	done  []bool // the rows fetched
}

// row returns the i-th row with logits, fetching it the first time.
func (l *lazyRows) row(i int) []float32 {
	r := l.buf[i*l.vocab : (i+1)*l.vocab]
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done[i] {
		l.fetch(i, r)
		l.done[i] = true
	}
	return r
}

// AttentionBuffer is the step's attention storage: at AttentionOffset(r,
// i), row r's scores (Heads x (Pos[r]+1), head-major), then as many
// probabilities.
func (o *Output) AttentionBuffer() []float32 { return o.attn }

// AttentionOffset is where row r's attention in the i-th layer asked for
// starts in AttentionBuffer, or -1 when it is not kept (a NoLogits row).
func (o *Output) AttentionOffset(r, i int) int { return o.attnOff[r*len(o.attnLayers)+i] }

// AttentionLayers is how many layers' attention the step keeps.
func (o *Output) AttentionLayers() int { return len(o.attnLayers) }

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
