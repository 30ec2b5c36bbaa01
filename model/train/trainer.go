package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// Run is a training run's settings; a checkpoint stores them and a resumed
// run must use the same.
type Run struct {
	Steps       int     `json:"steps"`
	Warmup      int     `json:"warmup"`
	LR          float64 `json:"lr"`
	MinLR       float64 `json:"min_lr"`
	WeightDecay float64 `json:"weight_decay"`
	Clip        float64 `json:"clip"`
	Seed        uint64  `json:"seed"`
	PerStep     int     `json:"per_step"` // examples a step
	RowLen      int     `json:"row_len"`  // tokens a packed row holds
}

// Validate checks the settings.
func (r Run) Validate() error {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) || x < 0 }
	switch {
	case r.Steps <= 0:
		return fmt.Errorf("train: %d steps", r.Steps)
	case r.Warmup < 0 || r.Warmup > r.Steps:
		return fmt.Errorf("train: %d warmup steps of %d", r.Warmup, r.Steps)
	case bad(r.LR) || r.LR == 0 || bad(r.MinLR) || r.MinLR > r.LR:
		return fmt.Errorf("train: learning rate %v (minimum %v)", r.LR, r.MinLR)
	case bad(r.WeightDecay) || r.WeightDecay >= 1 || bad(r.Clip):
		return fmt.Errorf("train: weight decay %v, clip %v", r.WeightDecay, r.Clip)
	case r.PerStep <= 0 || r.RowLen <= 1:
		return fmt.Errorf("train: %d examples a step, rows of %d", r.PerStep, r.RowLen)
	}
	return nil
}

// StepStats is what one step did.
type StepStats struct {
	Step      int // steps done, this one included
	Loss      float64
	GradNorm  float64 // before clipping
	LR        float64
	Tokens    int // real tokens in the batch (not padding)
	Targets   int // tokens with a loss
	FLOPs     float64
	Took      time.Duration
	TokPerSec float64 // over the run so far
	ETA       time.Duration
}

// Trainer runs the optimization loop: batches from Data, AdamW with the
// Run's schedule and clipping, a checkpoint every CheckpointEvery (and on
// cancellation), and callbacks for logging and evaluation.
type Trainer struct {
	Model *Model
	Opt   *AdamW
	Data  *Loader
	Run   Run
	Step  int // steps done
	// StopAt, when above Step and below Run.Steps, ends this call after
	// that many steps (with a checkpoint), the schedule still Run's: a
	// partial run that a -resume can finish, or that can be compared with
	// another run's checkpoint at the same step.
	StopAt int

	Checkpoint      string        // path; "" for none
	CheckpointEvery time.Duration // default 5 minutes
	// OnStep, if set, is called after every step.
	OnStep func(StepStats)
	// Log receives one line per checkpoint and the final messages.
	Log io.Writer
}

// ErrNaN is returned when the loss or the gradient stops being finite.
var ErrNaN = errors.New("train: the loss is not finite")

// Train runs the remaining steps. On cancellation it writes a checkpoint
// of the steps done and returns ctx's error; when the loss or gradient is
// not finite it stops without writing one, so the last good checkpoint
// stays, and returns an error wrapping ErrNaN.
func (t *Trainer) Train(ctx context.Context) error {
	if err := t.Run.Validate(); err != nil {
		return err
	}
	log := t.Log
	if log == nil {
		log = io.Discard
	}
	every := t.CheckpointEvery
	if every <= 0 {
		every = 5 * time.Minute
	}
	sched := Schedule{Peak: t.Run.LR, Min: t.Run.MinLR, Warmup: t.Run.Warmup, Steps: t.Run.Steps}
	start, lastSave := time.Now(), time.Now()
	startStep, tokens := t.Step, 0
	lastGood := "none yet"
	save := func() error {
		if t.Checkpoint == "" {
			return nil
		}
		if err := SaveCheckpoint(t.Checkpoint, t.Model, t.Opt, t.Step, t.Run); err != nil {
			return err
		}
		lastSave = time.Now()
		lastGood = fmt.Sprintf("step %d", t.Step)
		fmt.Fprintf(log, "checkpoint: step %d written to %s\n", t.Step, t.Checkpoint)
		return nil
	}
	end := t.Run.Steps
	if t.StopAt > t.Step && t.StopAt < end {
		end = t.StopAt
	}
	for t.Step < end {
		if err := ctx.Err(); err != nil {
			if serr := save(); serr != nil {
				return errors.Join(err, serr)
			}
			return err
		}
		t0 := time.Now()
		b := t.Data.Batch(t.Step)
		loss, err := t.Model.ForwardBackward(b)
		if err != nil {
			return err
		}
		norm := ClipGrads(t.Model.tensors, t.Run.Clip)
		if math.IsNaN(loss) || math.IsInf(loss, 0) || math.IsNaN(norm) || math.IsInf(norm, 0) {
			where := "no checkpoint was written"
			if t.Checkpoint != "" {
				where = fmt.Sprintf("the last good checkpoint (%s) is kept at %s", lastGood, t.Checkpoint)
			}
			return fmt.Errorf("%w at step %d (loss %v, gradient norm %v): stopped; %s", ErrNaN, t.Step+1, loss, norm, where)
		}
		lr := sched.At(t.Step)
		t.Opt.Step(t.Model.tensors, lr)
		t.Step++

		st := StepStats{Step: t.Step, Loss: loss, GradNorm: norm, LR: lr, Took: time.Since(t0), FLOPs: t.Model.FLOPs(b)}
		for i := range b.Tokens {
			if b.Targets[i] >= 0 {
				st.Targets++
			}
		}
		st.Tokens = t.Data.tokens(t.Step - 1)
		tokens += st.Tokens
		el := time.Since(start)
		st.TokPerSec = float64(tokens) / el.Seconds()
		st.ETA = time.Duration(float64(el) / float64(t.Step-startStep) * float64(end-t.Step))
		if t.OnStep != nil {
			t.OnStep(st)
		}
		if time.Since(lastSave) >= every {
			if err := save(); err != nil {
				return err
			}
		}
	}
	return save()
}

// tokens is the number of real tokens in the batch of step s.
func (l *Loader) tokens(s int) int {
	n := 0
	for k := s * l.perStep; k < (s+1)*l.perStep; k++ {
		n += len(l.example(k).Tokens)
	}
	return n
}

// FLOPs estimates the floating-point operations of one ForwardBackward on
// b: the products (2 per multiply-add) forward and, twice over, backward,
// plus attention's scores and weighted sums.
func (m *Model) FLOPs(b *Batch) float64 {
	s := &m.Shape
	hd := s.HeadDim()
	qd, kvd := s.Heads*hd, s.KVHeads*hd
	perTok := float64(s.Layers) * float64(s.Dim*(qd+2*kvd)+qd*s.Dim+3*s.Dim*s.HiddenDim)
	n := b.B * b.T
	var att float64
	rows := 0
	for i := 0; i < n; i++ {
		att += float64(b.pos(i)+1) * float64(s.Heads*hd) * float64(s.Layers)
		if b.Targets[i] >= 0 {
			rows++
		}
	}
	fwd := 2*perTok*float64(n) + 2*float64(rows)*float64(s.Vocab*s.Dim) + 2*2*att
	return 3 * fwd
}

// MemoryBytes estimates the memory training a model of this shape takes
// with batches of n tokens: parameters, gradients and two moments, plus the
// saved activations and scratch, with attention over sequences of up to
// seqLen tokens.
func MemoryBytes(params int64, dim, hidden, heads, layers, vocab int, n, seqLen int64) int64 {
	perTokLayer := int64(11*dim+6*hidden+4) + int64(heads)*seqLen
	perTok := int64(layers)*perTokLayer + int64(8*dim+3*hidden) + 3*int64(max(dim, hidden, vocab))
	return 4 * (4*params + n*perTok)
}
