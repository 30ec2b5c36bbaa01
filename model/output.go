package model

import (
	"errors"

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

// Output is the result of a forward step. Its slices belong to the
// backend and are valid until its next Forward call, but for the rows of
// Logits: those stay valid one call longer, until the second successful
// Forward after the one that returned them (a search keeps the row that
// chose a token, for taking the token back at the next step, without a
// copy). A backend fills it through Prepare, LogitsBuffer, AttentionBuffer
// and AttentionOffset.
type Output struct {
	Pos []int // the position each row was written at

	vocab      int
	logits     []float32 // packed, one vocab-sized row per row with logits
	logitIndex []int     // row -> index into logits, or -1
	// spare is the logits buffer of the step before the last: the next
	// Prepare writes there.
	spare []float32

	heads      int
	attnLayers []int
	attnOff    []int     // row*len(attnLayers)+i -> offset into attn
	attn       []float32 // per row and layer: scores then probabilities, Heads x (Pos+1) each
}

// ErrContextFull is returned when a row would be written past the model's
// context length.
var ErrContextFull = errors.New("model: context length exceeded")

// Logits returns row r's next-token logits (nil for a NoLogits row).
func (o *Output) Logits(r int) []float32 {
	i := o.logitIndex[r]
	if i < 0 {
		return nil
	}
	return o.logits[i*o.vocab : (i+1)*o.vocab]
}

// Attention returns row r's attention in the i-th of the layers asked for
// (the zero value when no attention was asked for, or for a NoLogits row).
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
