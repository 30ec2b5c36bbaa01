package policy

import (
	"cmp"
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/model/kernels"
)

// TokenLogit is one candidate token and its (possibly transformed) logit.
type TokenLogit struct {
	ID    int32
	Logit float32
}

// Candidates is the working set a sampler chain transforms, in the spirit of
// llama.cpp's token data array: stages rescale logits, drop tokens, and a
// final stage selects one. It keeps its buffers between rows, so a
// Candidates reused for every step allocates only while it grows to the
// vocabulary size.
type Candidates struct {
	Items []TokenLogit
	// Selected is the index in Items a selecting stage chose, -1 if none.
	Selected int

	sorted   bool      // Items in descending logit order
	identity bool      // Items[i].ID == i for all i: a whole row, untouched order
	w        []float64 // scratch: weights, then cumulative weights
}

// Reset loads a whole row of logits.
func (c *Candidates) Reset(logits []float32) {
	c.Items = slices.Grow(c.Items[:0], len(logits))[:len(logits)]
	for i, l := range logits {
		c.Items[i] = TokenLogit{ID: int32(i), Logit: l}
	}
	c.Selected = -1
	c.sorted = false
	c.identity = true
}

// ResetAbove loads only the logits >= cut: with cut = max + T·ln(min_p) it is
// min-p applied while loading, the cheap first filter over a large
// vocabulary.
func (c *Candidates) ResetAbove(logits []float32, cut float32) {
	c.Items = c.Items[:0]
	// l >= cut is l > the float below cut: a vectorized scan skips from
	// one kept logit to the next (most of a large vocabulary is below). A
	// cut of -Inf keeps every logit, -Inf ones too.
	below := math.Nextafter32(cut, float32(math.Inf(-1)))
	if math.IsInf(float64(cut), -1) {
		below = float32(math.NaN())
		for i, l := range logits {
			if l >= cut {
				c.Items = append(c.Items, TokenLogit{ID: int32(i), Logit: l})
			}
		}
	}
	for i := 0; below == below && i < len(logits); i++ {
		i += kernels.FirstAbove(logits[i:], below)
		if i >= len(logits) {
			break
		}
		c.Items = append(c.Items, TokenLogit{ID: int32(i), Logit: logits[i]})
	}
	c.Selected = -1
	c.sorted = false
	c.identity = len(c.Items) == len(logits)
}

// ResetAboveTopK is ResetAbove then KeepTopK(k) for k > 0, without
// loading every logit above the cut when more than k pass: it stops at
// the (k+1)-th and keeps the k best with a heap fed by a vectorized scan
// for logits above the heap's least (ties: the lower token first), sorted
// as KeepTopK leaves them. When at most k pass, the result is ResetAbove's.
func (c *Candidates) ResetAboveTopK(logits []float32, cut float32, k int) {
	if k <= 0 || math.IsInf(float64(cut), -1) || cut != cut {
		c.ResetAbove(logits, cut)
		c.KeepTopK(k)
		return
	}
	c.Items = c.Items[:0]
	c.Selected, c.sorted = -1, false
	below := math.Nextafter32(cut, float32(math.Inf(-1)))
	i := 0
	for ; i < len(logits); i++ {
		i += kernels.FirstAbove(logits[i:], below)
		if i >= len(logits) || len(c.Items) == k {
			break
		}
		c.Items = append(c.Items, TokenLogit{ID: int32(i), Logit: logits[i]})
	}
	c.identity = len(c.Items) == len(logits)
	if i >= len(logits) {
		return // at most k passed
	}
	// A min-heap of the k best so far (the least at the root); i is the
	// first logit past them that passes the cut.
	h := c.Items
	less := func(a, b TokenLogit) bool { return byLogitDesc(a, b) > 0 } // a ranks below b
	down := func(j int) {
		for {
			l := 2*j + 1
			if l >= len(h) {
				return
			}
			if r := l + 1; r < len(h) && less(h[r], h[l]) {
				l = r
			}
			if !less(h[l], h[j]) {
				return
			}
			h[j], h[l] = h[l], h[j]
			j = l
		}
	}
	for j := len(h)/2 - 1; j >= 0; j-- {
		down(j)
	}
	for i < len(logits) {
		if x := (TokenLogit{ID: int32(i), Logit: logits[i]}); less(h[0], x) {
			h[0] = x
			down(0)
		}
		i++
		i += kernels.FirstAbove(logits[i:], max(below, h[0].Logit))
	}
	c.identity = false
	c.sort()
}

// Len returns the number of candidates left.
func (c *Candidates) Len() int { return len(c.Items) }

// Token returns the selected token, or -1.
func (c *Candidates) Token() int {
	if c.Selected < 0 || c.Selected >= len(c.Items) {
		return -1
	}
	return int(c.Items[c.Selected].ID)
}

// Remove gives token id zero probability (on a whole row its logit becomes
// -Inf, elsewhere it is dropped) and reports whether it was there.
func (c *Candidates) Remove(id int) bool {
	if c.identity && id >= 0 && id < len(c.Items) {
		c.Items[id].Logit = float32(math.Inf(-1))
		return true
	}
	for i, it := range c.Items {
		if int(it.ID) == id {
			c.Items = append(c.Items[:i], c.Items[i+1:]...)
			c.identity = false
			c.Selected = -1
			return true
		}
	}
	return false
}

// Probs writes softmax of the current logits, in Items order, into dst
// (grown as needed) and returns it.
func (c *Candidates) Probs(dst []float64) []float64 {
	dst = slices.Grow(dst[:0], len(c.Items))[:len(c.Items)]
	if len(c.Items) == 0 {
		return dst
	}
	mx := c.maxLogit()
	var z float64
	for i, it := range c.Items {
		e := math.Exp(float64(it.Logit) - mx)
		dst[i] = e
		z += e
	}
	for i := range dst {
		dst[i] /= z
	}
	return dst
}

func (c *Candidates) maxLogit() float64 {
	if c.sorted && len(c.Items) > 0 {
		return float64(c.Items[0].Logit)
	}
	m := float32(math.Inf(-1))
	for _, it := range c.Items {
		m = max(m, it.Logit)
	}
	return float64(m)
}

func (c *Candidates) argMax() int {
	if len(c.Items) == 0 {
		return -1
	}
	if c.sorted {
		return 0
	}
	best := 0
	for i, it := range c.Items {
		if it.Logit > c.Items[best].Logit {
			best = i
		}
	}
	return best
}

// Scale divides the logits by temperature t. t <= 0 means greedy: only the
// most probable token is kept.
func (c *Candidates) Scale(t float64) {
	if t == 1 || len(c.Items) == 0 {
		return
	}
	if t <= 0 || math.IsNaN(t) {
		c.keepOnly(c.argMax())
		return
	}
	inv := float32(1 / t)
	for i := range c.Items {
		c.Items[i].Logit *= inv
	}
}

func (c *Candidates) keepOnly(i int) {
	if i < 0 {
		return
	}
	c.Items[0] = c.Items[i]
	c.Items = c.Items[:1]
	c.sorted = true
	c.identity = false
	c.Selected = -1
}

// KeepMinP drops every token whose probability is below p times that of the
// most probable one (p <= 0: no-op). No exp is needed: the test is
// l >= max + ln p. The order of the rest is kept.
func (c *Candidates) KeepMinP(p float64) {
	if !(p > 0) || len(c.Items) == 0 {
		return
	}
	cut := float32(c.maxLogit() + math.Log(min(p, 1)))
	k := 0
	for _, it := range c.Items {
		if it.Logit >= cut {
			c.Items[k] = it
			k++
		}
	}
	if k < len(c.Items) {
		c.identity = false
		c.Selected = -1
	}
	c.Items = c.Items[:k]
}

// KeepTopK keeps the k most probable tokens, sorted most probable first
// (k <= 0 or k >= Len: no-op). It partially selects in expected linear time, then sorts
// only the k kept.
func (c *Candidates) KeepTopK(k int) {
	n := len(c.Items)
	if k <= 0 || n == 0 {
		return
	}
	if k >= n {
		return
	}
	if !c.sorted {
		selectTop(c.Items, k)
		c.Items = c.Items[:k]
		c.sort()
	}
	c.Items = c.Items[:k]
	c.identity = false
	c.Selected = -1
}

// KeepTopP keeps the smallest set of most probable tokens whose probability
// mass reaches p (at least one token; p >= 1: no-op). Unsorted sets are cut
// by a mass-aware quickselect in expected linear time; the kept tokens are
// not sorted afterwards unless they were before.
func (c *Candidates) KeepTopP(p float64) {
	n := len(c.Items)
	if n <= 1 || p >= 1 || math.IsNaN(p) {
		return
	}
	if p <= 0 {
		c.keepOnly(c.argMax())
		return
	}
	mx := c.maxLogit()
	w := slices.Grow(c.w[:0], n)[:n]
	c.w = w
	var total float64
	for i, it := range c.Items {
		e := math.Exp(float64(it.Logit) - mx)
		w[i] = e
		total += e
	}
	need := p * total
	var m int
	if c.sorted {
		m = n
		var cum float64
		for i, e := range w {
			cum += e
			if cum >= need {
				m = i + 1
				break
			}
		}
	} else {
		m = selectMass(c.Items, w, need)
	}
	m = max(m, 1)
	if m < n {
		c.identity = false
		c.Selected = -1
	}
	c.Items = c.Items[:m]
}

// ArgMax selects the most probable token (the first on ties) and returns
// it, or -1 for an empty set.
func (c *Candidates) ArgMax() int {
	c.Selected = c.argMax()
	return c.Token()
}

// Draw selects a token from softmax of the current logits by inverse CDF
// over float64 cumulative weights with one uniform from r, and returns it
// (-1 when no token has weight).
func (c *Candidates) Draw(r *RNG) int {
	if !c.prepareDraw() {
		c.Selected = -1
		return -1
	}
	return c.drawPrepared(r)
}

// prepareDraw fills c.w with cumulative weights; false if there is nothing
// to draw.
func (c *Candidates) prepareDraw() bool {
	n := len(c.Items)
	if n == 0 {
		return false
	}
	mx := c.maxLogit()
	if math.IsInf(mx, -1) || math.IsNaN(mx) {
		return false
	}
	w := slices.Grow(c.w[:0], n)[:n]
	c.w = w
	var cum float64
	for i, it := range c.Items {
		cum += math.Exp(float64(it.Logit) - mx)
		w[i] = cum
	}
	return cum > 0 && !math.IsNaN(cum)
}

func (c *Candidates) drawPrepared(r *RNG) int {
	w := c.w[:len(c.Items)]
	u := r.Float64() * w[len(w)-1]
	// First i with w[i] > u; zero-weight tokens never win.
	lo, hi := 0, len(w)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if w[mid] > u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	c.Selected = lo
	return int(c.Items[lo].ID)
}

func (c *Candidates) sort() {
	if c.sorted {
		return
	}
	slices.SortFunc(c.Items, byLogitDesc)
	c.sorted = true
	c.identity = false
	c.Selected = -1
}

func byLogitDesc(a, b TokenLogit) int {
	if a.Logit != b.Logit {
		return cmp.Compare(b.Logit, a.Logit)
	}
	return cmp.Compare(a.ID, b.ID)
}

// partition3 reorders items (and w alongside, when not nil) into
// [> pivot][== pivot][< pivot] and returns the sizes of the first two parts.
func partition3(items []TokenLogit, w []float64, pivot float32) (gt, eq int) {
	lt, i, hi := 0, 0, len(items)
	for i < hi {
		l := items[i].Logit
		switch {
		case l > pivot:
			items[i], items[lt] = items[lt], items[i]
			if w != nil {
				w[i], w[lt] = w[lt], w[i]
			}
			lt++
			i++
		case l < pivot:
			hi--
			items[i], items[hi] = items[hi], items[i]
			if w != nil {
				w[i], w[hi] = w[hi], w[i]
			}
		default:
			i++
		}
	}
	return lt, hi - lt
}

func median3(a, b, c float32) float32 {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}

// sortSmall sorts items (and w alongside) by descending logit, for short
// ranges.
func sortSmall(items []TokenLogit, w []float64) {
	for i := 1; i < len(items); i++ {
		for j := i; j > 0 && byLogitDesc(items[j], items[j-1]) < 0; j-- {
			items[j], items[j-1] = items[j-1], items[j]
			if w != nil {
				w[j], w[j-1] = w[j-1], w[j]
			}
		}
	}
}

const smallRange = 24

// selectTop reorders items so that items[:k] hold k of the largest logits
// (0 < k < len(items)), in expected linear time.
func selectTop(items []TokenLogit, k int) {
	lo, hi := 0, len(items)
	for depth := 0; hi-lo > smallRange; depth++ {
		if depth > 64 { // pathological pivots: finish with a sort
			slices.SortFunc(items[lo:hi], byLogitDesc)
			return
		}
		r := items[lo:hi]
		pivot := median3(r[0].Logit, r[len(r)/2].Logit, r[len(r)-1].Logit)
		gt, eq := partition3(r, nil, pivot)
		switch {
		case k <= lo+gt:
			hi = lo + gt
		case k <= lo+gt+eq:
			return
		default:
			lo += gt + eq
		}
	}
	sortSmall(items[lo:hi], nil)
}

// selectMass reorders items and their weights w so that items[:m] are the m
// most probable tokens, m the smallest count whose weight reaches need, and
// returns m. Expected linear time.
func selectMass(items []TokenLogit, w []float64, need float64) int {
	lo, hi := 0, len(items) // items[:lo] are kept; the cut lies in [lo, hi]
	for depth := 0; hi-lo > smallRange && depth <= 64; depth++ {
		r := items[lo:hi]
		pivot := median3(r[0].Logit, r[len(r)/2].Logit, r[len(r)-1].Logit)
		gt, eq := partition3(r, w[lo:hi], pivot)
		var massGT, massEQ float64
		for _, e := range w[lo : lo+gt] {
			massGT += e
		}
		if massGT >= need {
			hi = lo + gt
			continue
		}
		need -= massGT
		lo += gt
		for _, e := range w[lo : lo+eq] {
			massEQ += e
		}
		if massEQ >= need {
			// Tied tokens share one weight: take just enough of them.
			k := eq
			if e := w[lo]; e > 0 {
				k = min(eq, max(1, int(math.Ceil(need/e))))
			}
			return lo + k
		}
		need -= massEQ
		lo += eq
	}
	r := items[lo:hi]
	if len(r) > smallRange {
		// Pivots went bad: sort the rest, weights alongside via an index.
		sortPairs(r, w[lo:hi])
	} else {
		sortSmall(r, w[lo:hi])
	}
	for i := lo; i < hi; i++ {
		need -= w[i]
		if need <= 0 {
			return i + 1
		}
	}
	return hi
}

// sortPairs sorts items by descending logit and recomputes nothing: equal
// logits have equal weights, so the weights can be sorted independently in
// the same (descending) order.
func sortPairs(items []TokenLogit, w []float64) {
	slices.SortFunc(items, byLogitDesc)
	slices.SortFunc(w, func(a, b float64) int { return cmp.Compare(b, a) })
}
