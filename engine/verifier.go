package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/tree"
)

// A verifier is an outcome reward model: a small language model over the
// task model's vocabulary, trained to read a prompt and one complete
// answer and to say whether the answer is right. Its input is
//
//	prompt tokens, the path's tokens (stop tokens left out), end of text
//
// and its verdict is read from the logits of the last row: the probability
// of its "yes" token against its "no" token (a softmax over the two). A
// search with a verifier (WithVerifier) judges its complete paths once it
// has them and weighs its answer vote by the verdicts: beam-adaptive,
// beam search, self-consistency and best-of-N (the single-path modes have
// nothing to choose). The verifier's forward rows are the search's rows:
// they count in Stats.Rows and against Budget.MaxRows (the prompt's
// prefill in Stats.PromptRows, as the search's own). Paths that share a
// prefix share the verifier's KV cache (a copy-on-write fork, cut back to
// the shared prefix), so a tree's paths cost only the tokens that tell
// them apart.
//
// A verifier may also weigh in how its own model reads the path (a
// VerifierHead, in its metadata): a verifier started from a model that is
// better at the task than the task model is surprised where a wrong path
// goes wrong (a wrong carry is an unlikely token to it), which its verdict
// token alone, trained briefly, does not learn to say. The probability is
// then a logistic function of the verdict's log-odds and the least and the
// summed log-probability its model gives the path's tokens and end of text,
// for the same rows (every row's logits are read).

// Verifier metadata keys of a verifier's GGUF file: VerifierKey holds the
// kind ("outcome"), the others the verdict tokens' text.
const (
	VerifierKey    = "entropix.verifier"
	VerifierYesKey = "entropix.verifier.yes"
	VerifierNoKey  = "entropix.verifier.no"
	// VerifierHeadKey holds a VerifierHead's weights: Verdict,
	// MinLogProb, SumLogProb, Bias (float32s).
	VerifierHeadKey = "entropix.verifier.head"
)

// VerifierHead weighs what a verifier reads of a path into the log-odds
// that it is right: its verdict's log-odds, and the least and the summed
// log-probability (nats) its model gives the path's tokens and end of
// text.
type VerifierHead struct {
	Verdict, MinLogProb, SumLogProb, Bias float64
}

// PathFeatures is what a verifier reads of one path: its verdict's
// log-odds (yes against no) and the least and the summed log-probability
// of the path's tokens and end of text under the verifier's model.
type PathFeatures struct {
	Verdict, MinLogProb, SumLogProb float64
}

// Prob returns the probability that a path with features f is right.
func (h VerifierHead) Prob(f PathFeatures) float64 {
	z := h.Verdict*f.Verdict + h.MinLogProb*f.MinLogProb + h.SumLogProb*f.SumLogProb + h.Bias
	return 1 / (1 + math.Exp(-z))
}

// ErrVerifierMismatch is returned when a verifier does not fit the model
// it should judge (another vocabulary), or a file is not a verifier.
var ErrVerifierMismatch = errors.New("engine: the verifier does not fit the model")

// Verifier is an outcome reward model ready to judge a task model's paths.
type Verifier struct {
	m       *model.Model
	yes, no int
	head    *VerifierHead // nil: the verdict alone
}

// NewVerifier returns the verifier m whose verdicts are the tokens of text
// yes and no (one token each, distinct).
func NewVerifier(m *model.Model, yes, no string) (*Verifier, error) {
	if m == nil || m.Tokenizer == nil {
		return nil, errors.New("engine: verifier: no model or no tokenizer")
	}
	y, okY := m.Tokenizer.Lookup(yes)
	n, okN := m.Tokenizer.Lookup(no)
	if !okY || !okN || y == n {
		return nil, fmt.Errorf("%w: its verdict tokens %q and %q are not two tokens of its vocabulary", ErrVerifierMismatch, yes, no)
	}
	if m.Tokenizer.EOS() < 0 {
		return nil, fmt.Errorf("%w: its vocabulary has no end-of-text token", ErrVerifierMismatch)
	}
	return &Verifier{m: m, yes: y, no: n}, nil
}

// LoadVerifier loads a verifier's GGUF file: a model whose metadata names
// it a verifier (VerifierKey) and its verdict tokens.
func LoadVerifier(path string) (*Verifier, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("engine: verifier: %w", err)
	}
	kind, _ := f.String(VerifierKey)
	yes, _ := f.String(VerifierYesKey)
	no, _ := f.String(VerifierNoKey)
	hw, hasHead := f.Float32s(VerifierHeadKey)
	f.Close()
	if kind != "outcome" || yes == "" || no == "" {
		return nil, fmt.Errorf("%w: %s is not a verifier (no %s = \"outcome\" with its verdict tokens in its metadata; a task model?)", ErrVerifierMismatch, path, VerifierKey)
	}
	var head *VerifierHead
	if hasHead {
		if len(hw) != 4 || slices.ContainsFunc(hw, func(x float32) bool { return !finite(x) }) {
			return nil, fmt.Errorf("%w: %s: %s holds %d numbers, want 4 finite ones", ErrVerifierMismatch, path, VerifierHeadKey, len(hw))
		}
		head = &VerifierHead{Verdict: float64(hw[0]), MinLogProb: float64(hw[1]), SumLogProb: float64(hw[2]), Bias: float64(hw[3])}
	}
	m, err := model.Load(path, "")
	if err != nil {
		return nil, fmt.Errorf("engine: verifier: %w", err)
	}
	v, err := NewVerifier(m, yes, no)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v.head = head
	return v, nil
}

// WithHead returns v whose probabilities come from head (nil: from the
// verdict alone), sharing its model.
func (v *Verifier) WithHead(head *VerifierHead) *Verifier {
	w := *v
	if head != nil {
		h := *head
		w.head = &h
	} else {
		w.head = nil
	}
	return &w
}

// Head returns v's head, nil when its probability is its verdict alone.
func (v *Verifier) Head() *VerifierHead {
	if v.head == nil {
		return nil
	}
	h := *v.head
	return &h
}

// Model returns the verifier's model.
func (v *Verifier) Model() *model.Model { return v.m }

// Verdicts returns the verdict tokens: yes, no.
func (v *Verifier) Verdicts() (yes, no int) { return v.yes, v.no }

// Fits reports, as an error wrapping ErrVerifierMismatch, whether v cannot
// judge m's text: its vocabulary must be m's, token for token.
func (v *Verifier) Fits(m *model.Model) error {
	a, b := v.m.Tokenizer, m.Tokenizer
	if b == nil {
		return errors.New("engine: the model has no tokenizer")
	}
	if a.VocabSize() != b.VocabSize() || a.EOS() != b.EOS() || a.BOS() != b.BOS() {
		return fmt.Errorf("%w: its vocabulary has %d tokens, the model's %d (a verifier reads the model's tokens: train one on its vocabulary)", ErrVerifierMismatch, a.VocabSize(), b.VocabSize())
	}
	for i := range a.VocabSize() {
		if a.Token(i) != b.Token(i) {
			return fmt.Errorf("%w: token %d is %q in the verifier, %q in the model", ErrVerifierMismatch, i, a.Token(i), b.Token(i))
		}
	}
	return nil
}

// Input returns the verifier's input for a path: prompt, path (its stop
// tokens left out by the caller), end of text. The verdict is read from
// the logits of its last row.
func (v *Verifier) Input(prompt, path []int) []int {
	in := make([]int, 0, len(prompt)+len(path)+1)
	return append(append(append(in, prompt...), path...), v.m.Tokenizer.EOS())
}

// Prob returns the probability of yes in a logits row of the verifier.
func (v *Verifier) Prob(logits []float32) float64 {
	return 1 / (1 + math.Exp(float64(logits[v.no]-logits[v.yes])))
}

// prob returns the probability that a path with features f is right.
func (v *Verifier) prob(f PathFeatures) float64 {
	if v.head == nil {
		return 1 / (1 + math.Exp(-f.Verdict))
	}
	return v.head.Prob(f)
}

// verifierChunk is the most rows one of the verifier's forward passes feeds.
const verifierChunk = 64

// verifierRun is an engine's verifier at work: its KV cache and backend
// (the engine's kind), used by the driver goroutine only.
type verifierRun struct {
	v    *Verifier
	kv   *kvcache.Pool
	run  model.Backend
	rows []model.Row
}

func newVerifierRun(v *Verifier, backend string) (*verifierRun, error) {
	c := v.m.Config.ContextLen
	be, err := model.NewBackend(backend, v.m, model.CacheConfig{Tokens: 4 * c, BlockSize: kvcache.DefaultBlockSize, DType: kvcache.F32})
	if err != nil {
		return nil, fmt.Errorf("engine: verifier: %w", err)
	}
	return &verifierRun{v: v, kv: be.Cache(), run: be}, nil
}

// verifyStats is the work of one verification.
type verifyStats struct {
	rows, promptRows, passes int
}

// verifyCost returns the rows judging paths costs after the prompt: each
// path's tokens beyond the longest prefix it shares with a path judged
// before it (in lexical order), plus its end of text; identical paths
// cost nothing more.
func verifyCost(paths [][]int) int {
	order := lexOrder(paths)
	rows := 0
	var prev []int
	for i, k := range order {
		p := paths[k]
		if i > 0 && slices.Equal(p, prev) {
			continue
		}
		rows += len(p) - commonPrefix(prev, p) + 1
		prev = p
	}
	return rows
}

// lexOrder returns the indices of paths in lexical order of their tokens
// (stable): in this order each path shares its longest prefix with the
// one before it.
func lexOrder(paths [][]int) []int {
	order := make([]int, len(paths))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return slices.Compare(paths[a], paths[b]) })
	return order
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// verify judges paths (token ids after prompt, stop tokens left out) and
// returns the probability that each is right. Paths are judged in lexical
// order while the rows left (maxRows after the prompt; 0: no limit) can
// pay for them; the others get NaN, as do paths that do not fit the
// verifier's context.
func (r *verifierRun) verify(prompt []int, paths [][]int, maxRows int) ([]float64, verifyStats, error) {
	fs, st, err := r.features(prompt, paths, maxRows, r.v.head != nil)
	probs := make([]float64, len(paths))
	for i, f := range fs {
		probs[i] = math.NaN()
		if !math.IsNaN(f.Verdict) {
			probs[i] = r.v.prob(f)
		}
	}
	return probs, st, err
}

// features reads paths as verify judges them and returns their features
// (Verdict NaN for a path not judged); with lik, also the log-probability
// of their tokens (every row's logits read; else the last row's only,
// and MinLogProb and SumLogProb are 0).
func (r *verifierRun) features(prompt []int, paths [][]int, maxRows int, lik bool) ([]PathFeatures, verifyStats, error) {
	var st verifyStats
	fs := make([]PathFeatures, len(paths))
	for i := range fs {
		fs[i].Verdict = math.NaN()
	}
	ctx := r.v.m.Config.ContextLen
	if len(paths) == 0 || len(prompt)+1 >= ctx {
		return fs, st, nil
	}
	root := r.kv.NewSeq()
	defer r.kv.Free(root)
	// rows[i]: the log-softmax of the row that predicts token i of the
	// path fed last (rows[0] the prompt's last row), with lik.
	var rows [][]float32
	keep := func(lo int) func(j int, logits []float32) {
		return func(j int, logits []float32) {
			if i := lo + j; i < len(rows) {
				rows[i] = logSoftmax(rows[i][:0], logits)
			} else {
				rows = append(rows, logSoftmax(nil, logits))
			}
		}
	}
	var got func(int, []float32)
	if lik {
		got = func(j int, logits []float32) {
			if j == len(prompt)-1 {
				keep(0)(0, logits)
			}
		}
	}
	if err := r.feedWith(root, prompt, false, got, &st); err != nil {
		return fs, st, err
	}
	st.promptRows, st.rows = st.rows, 0
	var prevSeq *kvcache.Seq
	defer func() {
		if prevSeq != nil {
			r.kv.Free(prevSeq)
		}
	}()
	var prev []int
	var prevF PathFeatures
	for _, k := range lexOrder(paths) {
		p := paths[k]
		if prevSeq != nil && slices.Equal(p, prev) {
			fs[k] = prevF
			continue
		}
		lcp := 0
		if prevSeq != nil {
			lcp = commonPrefix(prev, p)
		}
		cost := len(p) - lcp + 1
		if len(prompt)+len(p)+1 > ctx || (maxRows > 0 && st.rows+cost > maxRows) {
			continue
		}
		from := root
		if prevSeq != nil {
			from = prevSeq
		}
		seq := r.kv.Fork(from)
		if err := r.kv.Truncate(seq, len(prompt)+lcp); err != nil {
			r.kv.Free(seq)
			return fs, st, fmt.Errorf("engine: verifier: %w", err)
		}
		in := append(slices.Clone(p[lcp:]), r.v.m.Tokenizer.EOS())
		f := PathFeatures{Verdict: math.NaN()}
		store := keep(lcp + 1)
		got := func(j int, logits []float32) {
			if j == len(in)-1 {
				f.Verdict = float64(logits[r.v.yes] - logits[r.v.no])
			}
			if lik {
				store(j, logits)
			}
		}
		if err := r.feedWith(seq, in, lik, got, &st); err != nil {
			r.kv.Free(seq)
			return fs, st, err
		}
		if math.IsNaN(f.Verdict) || math.IsInf(f.Verdict, 0) {
			r.kv.Free(seq)
			return fs, st, fmt.Errorf("engine: verifier: %w", ErrNonFinite)
		}
		if lik {
			rows = rows[:len(in)+lcp+1]
			f.MinLogProb = math.Inf(1)
			for i := 0; i <= len(p); i++ {
				t := r.v.m.Tokenizer.EOS()
				if i < len(p) {
					t = p[i]
				}
				lp := float64(rows[i][t])
				f.SumLogProb += lp
				f.MinLogProb = min(f.MinLogProb, lp)
			}
		}
		fs[k] = f
		if prevSeq != nil {
			r.kv.Free(prevSeq)
		}
		prevSeq, prev, prevF = seq, p, f
	}
	return fs, st, nil
}

// logSoftmax appends the log-softmax of logits to dst.
func logSoftmax(dst, logits []float32) []float32 {
	mx := logits[0]
	for _, x := range logits {
		mx = max(mx, x)
	}
	var sum float64
	for _, x := range logits {
		sum += math.Exp(float64(x - mx))
	}
	z := mx + float32(math.Log(sum))
	for _, x := range logits {
		dst = append(dst, x-z)
	}
	return dst
}

// feedWith feeds toks to seq in chunks, counting the rows and passes;
// with got, it passes got the logits of the last row (j: its index in
// toks), or of every row with all.
func (r *verifierRun) feedWith(seq *kvcache.Seq, toks []int, all bool, got func(j int, logits []float32), st *verifyStats) error {
	for lo := 0; lo < len(toks); lo += verifierChunk {
		hi := min(lo+verifierChunk, len(toks))
		r.rows = r.rows[:0]
		for j := lo; j < hi; j++ {
			r.rows = append(r.rows, model.Row{Seq: seq, Token: toks[j], NoLogits: got == nil || (!all && j < len(toks)-1)})
		}
		out, err := r.run.Forward(r.rows)
		if err != nil {
			return fmt.Errorf("engine: verifier: %w", err)
		}
		st.rows += hi - lo
		st.passes++
		for j := lo; j < hi && got != nil; j++ {
			if all || j == len(toks)-1 {
				got(j, out.Logits(j-lo))
			}
		}
	}
	return nil
}

func finite(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }

// verifyLeaves judges the complete paths ending at leaves with the
// engine's verifier, within the rows the budget leaves, and records the
// verdicts (s.verified) and the rows spent. It does nothing without a
// verifier.
func (s *search) verifyLeaves(leaves []tree.ID) {
	if s.opts.Verifier == nil || s.e.ver == nil || len(leaves) == 0 || s.ctx.Err() != nil {
		return
	}
	paths := make([][]int, len(leaves))
	for i, id := range leaves {
		paths[i] = slices.DeleteFunc(s.t.Tokens(id), s.isStop)
	}
	left := 0
	if s.b.MaxRows > 0 {
		left = s.b.MaxRows - s.res.Stats.Rows
		if left <= 0 {
			return
		}
	}
	probs, st, err := s.e.ver.verify(s.prompt, paths, left)
	s.res.Stats.Rows += st.rows
	s.res.Stats.PromptRows += st.promptRows
	s.res.Stats.ForwardPasses += st.passes
	if err != nil {
		s.err = err
		return
	}
	if s.verified == nil {
		s.verified = map[tree.ID]float64{}
	}
	for i, id := range leaves {
		if !math.IsNaN(probs[i]) {
			s.verified[id] = probs[i]
		}
	}
}

// verifiedVote returns the answer with the largest summed verdicts among
// the judged leaves and its best-judged leaf, false when no leaf was
// judged. An answer-less path votes only when no path has an answer.
// (Weighing each verdict by the path's probability too, the rule while
// the verifier shared the task model's weights and ranked a right path
// above a wrong one of the same problem in 57% of pairs, answered 58.2%
// on held-out problems 501-1000 with beam-adaptive at 276 rows against
// 62.6% for the verdicts alone, once the verifier ranked 90.5% of them.)
func (s *search) verifiedVote(leaves []tree.ID) (tree.ID, bool) {
	mass := map[string]float64{}
	var order []string
	for _, id := range leaves {
		p, ok := s.verified[id]
		if !ok {
			continue
		}
		a := s.answer(id)
		if _, seen := mass[a]; !seen {
			order = append(order, a)
		}
		mass[a] += p
	}
	if len(order) == 0 {
		return tree.None, false
	}
	win := heaviest(order, mass)
	best := tree.None
	for _, id := range leaves {
		p, ok := s.verified[id]
		if !ok || s.answer(id) != win {
			continue
		}
		if best == tree.None || p > s.verified[best] {
			best = id
		}
	}
	return best, true
}

// Judge returns v's verdicts on paths (token ids after prompt, stop tokens
// left out), the probability that each is right (NaN for a path that does
// not fit the verifier's context), with a KV cache of its own: for
// evaluating a verifier apart from any search. It is not safe for
// concurrent use with itself.
func (v *Verifier) Judge(prompt []int, paths [][]int) ([]float64, error) {
	r, err := newVerifierRun(v, "cpu")
	if err != nil {
		return nil, err
	}
	defer r.run.Close()
	probs, _, err := r.verify(prompt, paths, 0)
	return probs, err
}

// Features returns what v reads of paths (as Judge takes them): the
// verdict's log-odds and the log-probability its model gives their tokens;
// Verdict is NaN for a path that does not fit the verifier's context. It
// is what a VerifierHead is fitted to.
func (v *Verifier) Features(prompt []int, paths [][]int) ([]PathFeatures, error) {
	r, err := newVerifierRun(v, "cpu")
	if err != nil {
		return nil, err
	}
	defer r.run.Close()
	fs, _, err := r.features(prompt, paths, 0, true)
	return fs, err
}

// verifiedChoice judges leaves with the verifier and returns the best
// judged leaf of the answer whose judged leaves' verdicts sum the most
// (see verifiedVote; best-of-N takes the best-judged leaf), false without a verifier or when no leaf could be
// judged within the budget.
func (s *search) verifiedChoice(leaves []tree.ID) (tree.ID, bool) {
	if s.opts.Verifier == nil {
		return tree.None, false
	}
	s.verifyLeaves(leaves)
	if s.opts.Mode == BestOfN {
		best := tree.None
		for _, id := range leaves {
			if p, ok := s.verified[id]; ok && (best == tree.None || p > s.verified[best]) {
				best = id
			}
		}
		return best, best != tree.None
	}
	return s.verifiedVote(leaves)
}

// verifyReserve is the rows beam-adaptive keeps for its verifier: those
// judging its finished paths will cost, and for every live path its
// tokens since it left the others and its end of text (0 without a
// verifier).
func (s *adaptive) verifyReserve() int {
	if s.opts.Verifier == nil {
		return 0
	}
	paths := make([][]int, len(s.leaves))
	for i, id := range s.leaves {
		paths[i] = slices.DeleteFunc(s.t.Tokens(id), s.isStop)
	}
	rows := verifyCost(paths)
	for _, br := range s.live {
		own := 0
		for id := br.leaf; id != tree.Root; {
			n := s.t.Node(id)
			p := s.t.Node(n.Parent)
			own++
			if p == nil || len(p.Children) > 1 {
				break
			}
			id = n.Parent
		}
		rows += s.rowsToFinish(br.leaf) + own + 1
	}
	return rows
}

// verifyExtra is what judging a waiting alternative's path costs the
// verifier once it has finished: its own tokens and its end of text (0
// without a verifier).
func (s *adaptive) verifyExtra(id tree.ID) int {
	if s.opts.Verifier == nil {
		return 0
	}
	return s.rowsToFinish(id) + 1
}

// MarkVerifier writes the GGUF image b (a model over the task model's
// vocabulary, trained as a verifier) with the verifier's metadata added:
// VerifierKey "outcome" and the verdict tokens' text yes and no.
func MarkVerifier(w io.Writer, b []byte, yes, no string) error {
	return MarkVerifierHead(w, b, yes, no, nil)
}

// MarkVerifierHead is MarkVerifier with the verifier's head (none: nil).
func MarkVerifierHead(w io.Writer, b []byte, yes, no string, head *VerifierHead) error {
	f, err := gguf.Parse(b)
	if err != nil {
		return err
	}
	kv := append(slices.Clone(f.KV), gguf.KV{Key: VerifierKey, Value: gguf.String("outcome")},
		gguf.KV{Key: VerifierYesKey, Value: gguf.String(yes)}, gguf.KV{Key: VerifierNoKey, Value: gguf.String(no)})
	if head != nil {
		kv = append(kv, gguf.KV{Key: VerifierHeadKey, Value: gguf.Float32s([]float32{float32(head.Verdict),
			float32(head.MinLogProb), float32(head.SumLogProb), float32(head.Bias)})})
	}
	ts := make([]gguf.WriteTensor, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		ts[i] = gguf.WriteTensor{Name: t.Name, Dims: t.Dims, Type: t.Type, Data: f.TensorData(t)}
	}
	return gguf.Write(w, kv, ts)
}
