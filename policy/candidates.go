package policy

import (
	"cmp"
	"math"
	"slices"

	"github.com/entropix-search/entropix-search/policy/rowstat"
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
	row      []float32 // scratch: a penalized copy of a row (Chain.Sample)
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
		i += rowstat.FirstAbove(logits[i:], below)
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
		i += rowstat.FirstAbove(logits[i:], below)
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
	// first logit past them that passes the cut. None is NaN.
	h := c.Items
	for j := len(h)/2 - 1; j >= 0; j-- {
		siftDownLeast(h, j)
	}
	for i < len(logits) {
		if x := (TokenLogit{ID: int32(i), Logit: logits[i]}); ranksBelow(h[0], x) {
			h[0] = x
			siftDownLeast(h, 0)
		}
		i++
		i += rowstat.FirstAbove(logits[i:], max(below, h[0].Logit))
	}
	c.identity = false
	c.sort()
}

// resetScaled is Reset then, when scaled, Scale(t) for a t > 0 and not 1
// whose float32 reciprocal is inv, in one pass. (When inv is 1 the
// product still quiets a signaling NaN, as Scale's does.)
func (c *Candidates) resetScaled(logits []float32, inv float32, scaled bool) {
	if !scaled {
		c.Reset(logits)
		return
	}
	c.Items = slices.Grow(c.Items[:0], len(logits))[:len(logits)]
	for i, l := range logits {
		c.Items[i] = TokenLogit{ID: int32(i), Logit: l * inv}
	}
	c.Selected = -1
	c.sorted = false
	c.identity = true
}

// resetArgMax is Reset then Scale(0) for a non-empty row: only the first
// of its largest logits, NaNs passed over but for a NaN first.
func (c *Candidates) resetArgMax(logits []float32) {
	arg := 0
	if l := logits[0]; l == l {
		_, arg, _ = rowstat.Top2(logits)
	}
	c.Items = append(c.Items[:0], TokenLogit{ID: int32(arg), Logit: logits[arg]})
	c.Selected = -1
	c.sorted = true
	c.identity = false
}

// scale multiplies the logits by inv, as Scale does with the reciprocal
// of its temperature, for candidates without NaN (multiplying by 1 is
// then nothing).
func (c *Candidates) scale(inv float32) {
	if inv == 1 {
		return
	}
	for i := range c.Items {
		c.Items[i].Logit *= inv
	}
}

// scaleSorted scales candidates sorted by descending logit and keeps them
// so sorted: tokens whose logits differ only until scaled go in token
// order.
func (c *Candidates) scaleSorted(inv float32) {
	if inv == 1 {
		return
	}
	c.scale(inv)
	for i := 1; i < len(c.Items); i++ {
		if byLogitDesc(c.Items[i-1], c.Items[i]) > 0 {
			slices.SortFunc(c.Items, byLogitDesc)
			return
		}
	}
}

// loadTopK leaves c as ResetAbove(logits, lo), scale(inv) and KeepTopK(k)
// (k > 0, lo > -Inf) would, loading no more than the k best when more
// pass and the k-th is not tied with the next after scaling.
func (c *Candidates) loadTopK(logits []float32, lo, inv float32, k int) {
	c.ResetAboveTopK(logits, lo, k)
	if !c.sorted { // at most k passed: KeepTopK keeps them as they are
		c.scale(inv)
		return
	}
	if c.tiedAtK(logits, inv) {
		c.ResetAbove(logits, lo)
		c.scale(inv)
		c.KeepTopK(k)
		return
	}
	c.scaleSorted(inv)
}

// tiedAtK reports, for the k candidates the best of logits sorted by
// descending unscaled logit, whether a logit outside them scales to the
// k-th's scaled logit: logits holds more than k logits at or above the
// least one that scales to it.
func (c *Candidates) tiedAtK(logits []float32, inv float32) bool {
	k := len(c.Items)
	lo := leastScaledAtLeast(inv, c.Items[k-1].Logit*inv)
	if math.IsInf(float64(lo), -1) {
		return len(logits) > k
	}
	below := math.Nextafter32(lo, float32(math.Inf(-1)))
	n := 0
	for i := 0; i < len(logits); i++ {
		i += rowstat.FirstAbove(logits[i:], below)
		if i >= len(logits) {
			break
		}
		if n++; n > k {
			return true
		}
	}
	return false
}

// leastScaledAtLeast returns the least non-NaN float32 x, -Inf included,
// with x·inv >= cut in float32 (inv > 0 and finite, cut not NaN): as the
// rounded product is monotone in x, x·inv >= cut iff x >= it. It looks a
// few ulps around cut/inv, then binary searches the float32s in order.
func leastScaledAtLeast(inv, cut float32) float32 {
	if inv == 1 {
		return cut
	}
	negInf, posInf := float32(math.Inf(-1)), float32(math.Inf(1))
	x := float32(float64(cut) / float64(inv))
	for range 4 {
		if x*inv < cut {
			x = math.Nextafter32(x, posInf)
			continue
		}
		if x == negInf {
			return x
		}
		y := math.Nextafter32(x, negInf)
		if y*inv < cut {
			return x
		}
		x = y
	}
	// key orders the float32s as integers: -Inf is 0x007fffff, +Inf
	// 0xff800000, and the NaNs lie outside.
	key := func(x float32) uint32 {
		if b := math.Float32bits(x); b>>31 != 0 {
			return ^b
		} else {
			return b | 1<<31
		}
	}
	val := func(k uint32) float32 {
		if k>>31 != 0 {
			return math.Float32frombits(k &^ (1 << 31))
		}
		return math.Float32frombits(^k)
	}
	lo, hi := key(negInf), key(posInf)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if val(mid)*inv >= cut {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return val(lo)
}

// cutRecords bounds the rises of the running maximum loadCut follows
// (about ln n in a row in random order) before it leaves the row to
// another path.
const cutRecords = 256

// Outcomes of loadCut.
const (
	cutDone   = iota
	cutTied   // a tie at the k-th scaled logit: the stages must choose
	cutGiveUp // another path must load the row
)

// loadCut leaves c as Reset(logits), a scaling by inv (finite, > 0; 1:
// none), KeepMinP(p) (p > 0; 0: none) then KeepTopK(k) (k > 0; 0: none)
// would, for a row without NaN or +Inf, in one scan that loads only the
// logits at or above
//
//   - min-p's cut for the largest logit seen so far (a cut that only
//     rises: the logits below the final one are dropped at the end), and
//   - with a top-k, once 4k+64 logits are loaded, a floor: the 4th
//     largest of a strided sample of the row, taken so that about 6k
//     logits lie above it (sampleFloor).
//
// When more than k are loaded, their k best after scaling are the whole
// set's unless the (k+1)-th ties with the k-th (cutTied: KeepTopK's choice
// among tied tokens depends on its partition of the whole set); those
// left out are all below the (k+1)-th. With k or fewer loaded, or no
// top-k, they are the set only if the floor did not cut and the cut is
// above -Inf (the scan never loads -Inf): else, as when too many are
// loaded (a floor far too low) or the running maximum rose too often, it
// gives up (cutGiveUp).
func (c *Candidates) loadCut(logits []float32, inv float32, p float64, k int) int {
	negInf := float32(math.Inf(-1))
	lnp := math.Log(min(p, 1))
	lowest := func(m float32) float32 { // the least logit KeepMinP keeps
		if !(p > 0) {
			return negInf
		}
		return leastScaledAtLeast(inv, float32(float64(m*inv)+lnp))
	}
	floor, sampleAt, limit := negInf, len(logits)+1, len(logits)
	if k > 0 {
		sampleAt, limit = 4*k+64, 32*k+1024
	}
	m := logits[0]
	lo, records := lowest(m), 0
	below := math.Nextafter32(lo, negInf) // loaded: > below
	items := c.Items[:0]
	defer func() { c.Items = items }() // keep the buffer, whatever happens
	for i, n := 0, len(logits); i < n; {
		j := i + rowstat.FirstAbove(logits[i:], below)
		// Logit j passes; where many do (the scan was short), compares
		// are cheaper than scans for the next few.
		end := j + 1
		if j-i < 8 {
			end = j + 8
		}
		for i, end = j, min(end, n); i < end; i++ {
			x := logits[i]
			if !(x > below) {
				continue
			}
			if p > 0 && x > m {
				if records++; records > cutRecords {
					return cutGiveUp
				}
				m, lo = x, lowest(x)
				below = math.Nextafter32(max(lo, floor), negInf)
			}
			items = append(items, TokenLogit{ID: int32(i), Logit: x})
			if len(items) == sampleAt {
				sampleAt = -1 // once
				floor = sampleFloor(logits, k)
				below = math.Nextafter32(max(lo, floor), negInf)
				items = slices.DeleteFunc(items, func(it TokenLogit) bool { return !(it.Logit > below) })
			} else if len(items) > limit {
				return cutGiveUp
			}
		}
	}
	if p > 0 && math.IsInf(float64(m), -1) {
		return cutGiveUp // a row of -Inf
	}
	cut, n := max(lo, floor), 0
	for _, it := range items {
		if it.Logit >= cut {
			it.Logit *= inv
			items[n] = it
			n++
		}
	}
	items = items[:n]
	c.Selected = -1
	if k == 0 || n <= k {
		// The set min-p keeps, unless the floor cut it or the scan left
		// out -Inf logits that pass (a cut of -Inf, or no min-p).
		if floor > lo || math.IsInf(float64(lo), -1) {
			return cutGiveUp
		}
		c.sorted = false
		c.identity = n == len(logits)
		return cutDone
	}
	// Every logit left out is below the (k+1)-th loaded one.
	if n > k+1 {
		selectTop(items, k+1)
	}
	top := items[:k+1]
	slices.SortFunc(top, byLogitDesc)
	if top[k-1].Logit == top[k].Logit {
		return cutTied
	}
	items = items[:k]
	c.sorted = true
	c.identity = false
	return cutDone
}

// sampleFloor returns a logit with about 6k of the row's logits above it:
// the j-th largest (4th, or fewer for a small k) of a strided sample, or
// -Inf for a row short for k (floorSample).
func sampleFloor(logits []float32, k int) float32 {
	m, stride, j := floorSample(len(logits), k)
	if m == 0 {
		return float32(math.Inf(-1))
	}
	var top [64]float32 // the j largest so far, descending
	cnt := 0
	for i := range m {
		x := logits[i*stride]
		if cnt == j {
			if x <= top[j-1] {
				continue
			}
			cnt--
		}
		t := cnt
		for ; t > 0 && top[t-1] < x; t-- {
			top[t] = top[t-1]
		}
		top[t] = x
		cnt++
	}
	return top[j-1]
}

// floorSample sizes sampleFloor's sample for n logits and a top-k: the m
// logits at multiples of stride, about n·4/(6k) of them but at most n/8
// and 2048, of which the j-th largest is the floor (j <= 64); m is 0 for
// no floor.
func floorSample(n, k int) (m, stride, j int) {
	if k <= 0 || n < 1024 {
		return 0, 0, 0
	}
	m = min(n/8, 2048, max(256, 4*n/(6*k)))
	if m < 1 {
		return 0, 0, 0
	}
	j = (6*k*m + n - 1) / n
	if j > 64 {
		return 0, 0, 0
	}
	return m, n / m, j
}

// ranksBelow reports whether a ranks below b in byLogitDesc's order (a
// lower logit, or the same and a higher token), for logits not NaN.
func ranksBelow(a, b TokenLogit) bool {
	return a.Logit < b.Logit || (a.Logit == b.Logit && a.ID > b.ID)
}

// siftDownLeast moves h[j] down the min-heap h (the lowest ranked at the
// root) to its place.
func siftDownLeast(h []TokenLogit, j int) {
	x := h[j]
	for {
		l := 2*j + 1
		if l >= len(h) {
			break
		}
		if r := l + 1; r < len(h) && ranksBelow(h[r], h[l]) {
			l = r
		}
		if !ranksBelow(h[l], x) {
			break
		}
		h[j] = h[l]
		j = l
	}
	h[j] = x
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
	// Four folds, then theirs, give the one fold's result without its
	// chain of dependent max: max is commutative and associative on
	// float32s, signed zeros included (+0 wins). NaN wins too, but the
	// bits of the NaN depend on the order: then the one fold gives them.
	ni := float32(math.Inf(-1))
	m0, m1, m2, m3 := ni, ni, ni, ni
	it, i := c.Items, 0
	for ; i+4 <= len(it); i += 4 {
		m0, m1 = max(m0, it[i].Logit), max(m1, it[i+1].Logit)
		m2, m3 = max(m2, it[i+2].Logit), max(m3, it[i+3].Logit)
	}
	for ; i < len(it); i++ {
		m0 = max(m0, it[i].Logit)
	}
	if m := max(max(m0, m1), max(m2, m3)); m == m {
		return float64(m)
	}
	m := ni
	for _, x := range it {
		m = max(m, x.Logit)
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
