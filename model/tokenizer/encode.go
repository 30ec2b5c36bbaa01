package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// scratch is the reusable working memory of one Encode call.
type scratch struct {
	buf    []byte
	syms   []symbol
	heap   pairHeap
	frags  []fragment
	frags2 []fragment
	cps    []codepoint
	spans  []span
	spans2 []span
}

// symbol is a run of bytes of the text being merged, linked to its
// neighbours. A symbol merged into its left neighbour has start == end.
type symbol struct {
	start, end int32 // byte range
	prev, next int32 // neighbours, -1 at the ends
	id         int32 // token id, -1 for a llama codepoint with no piece
}

// fragment is a piece of the input: raw text [start, end) or, when id >= 0,
// a special token cut out of it.
type fragment struct {
	start, end int
	id         int32
}

// Encode returns the token ids of text, after BOS when bos is true and the
// vocabulary has one. Control tokens written in the text (such as
// "<|eot_id|>") are encoded as the characters they are spelled with; only
// user-defined tokens are matched in the text, as llama.cpp does. Any
// string can be encoded, including invalid UTF-8 (its bytes are encoded
// one by one), and Decode(Encode(s, bos)) == s whenever the vocabulary has
// byte tokens (see Decode).
func (t *Tokenizer) Encode(text string, bos bool) []int {
	return t.AppendEncode(nil, text, bos)
}

// AppendEncode appends the token ids of text to dst, as Encode, and returns
// the extended slice.
func (t *Tokenizer) AppendEncode(dst []int, text string, bos bool) []int {
	return t.encode(dst, text, bos, t.userDefined, true)
}

// EncodeContinuation returns the token ids of text as it reads in the
// middle of a longer text: without the dummy space prefix a SentencePiece
// vocabulary puts before a text's start, so that " Wait," inserted after a
// word is "▁Wait," and not "▁▁Wait,". For byte-level BPE it is Encode.
func (t *Tokenizer) EncodeContinuation(text string) []int {
	return t.encode(nil, text, false, t.userDefined, false)
}

// EncodeSpecial is Encode that also turns the text of control tokens
// ("<s>", "<|begin_of_text|>", ...) into those tokens, for prompt templates
// written as text. Decode drops control tokens, so EncodeSpecial does not
// round-trip text that contains them.
func (t *Tokenizer) EncodeSpecial(text string, bos bool) []int {
	return t.encode(nil, text, bos, t.special, true)
}

func (t *Tokenizer) encode(dst []int, text string, bos bool, specials []int32, start bool) []int {
	if bos && t.bos >= 0 {
		dst = append(dst, t.bos)
	}
	if text == "" {
		return dst
	}
	s := t.pool.Get().(*scratch)
	defer t.pool.Put(s)

	frags := t.partition(s, text, specials)
	prevSpecial := start // llama: a text's start, and a fragment after a special token, get the space prefix
	for _, f := range frags {
		if f.id >= 0 {
			dst = append(dst, int(f.id))
			prevSpecial = true
			continue
		}
		for raw := text[f.start:f.end]; raw != ""; {
			part := raw
			if len(part) > maxFragment {
				cut := maxFragment
				for back := 0; back < utf8.UTFMax-1 && !utf8.RuneStart(part[cut]); back++ {
					cut--
				}
				part = part[:cut]
			}
			if t.kind == KindLlama {
				dst = t.encodeSPM(dst, s, part, t.addSpacePrefix && prevSpecial)
			} else {
				dst = t.encodeBPE(dst, s, part)
			}
			prevSpecial = false
			raw = raw[len(part):]
		}
	}
	return dst
}

// maxFragment bounds the bytes encoded in one piece, so that offsets fit
// in int32: text beyond 1 GiB between special tokens is encoded in
// consecutive pieces of at most this size, cut at a character boundary.
var maxFragment = 1 << 30

// partition cuts the special tokens out of text, longest tokens first, and
// returns the raw text and token fragments in order.
func (t *Tokenizer) partition(s *scratch, text string, specials []int32) []fragment {
	frags := append(s.frags[:0], fragment{0, len(text), -1})
	for _, id := range specials {
		tok := t.tokens[id]
		if !strings.Contains(text, tok) {
			continue
		}
		next := s.frags2[:0]
		for _, f := range frags {
			if f.id >= 0 {
				next = append(next, f)
				continue
			}
			for f.start < f.end {
				i := strings.Index(text[f.start:f.end], tok)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{f.start, f.start + i, -1})
				}
				next = append(next, fragment{f.start + i, f.start + i + len(tok), id})
				f.start += i + len(tok)
			}
			if f.start < f.end {
				next = append(next, f)
			}
		}
		frags, s.frags2 = next, frags
	}
	s.frags = frags
	return frags
}

// encodeSPM encodes one raw fragment with SentencePiece BPE, as llama2.c's
// run.c and llama.cpp do: every codepoint becomes its piece (or, lacking
// one, its bytes as <0xNN> tokens at the end), then the adjacent pair whose
// concatenation is the piece with the highest score is merged, leftmost
// first on ties, until no pair is a piece. A heap of candidate pairs makes
// this O(n log n).
func (t *Tokenizer) encodeSPM(dst []int, s *scratch, text string, prefix bool) []int {
	buf := s.buf[:0]
	if prefix {
		buf = append(buf, ' ')
	}
	buf = append(buf, text...)
	s.buf = buf
	if len(buf) == 0 {
		return dst
	}

	syms := s.syms[:0]
	for i := 0; i < len(buf); {
		_, size := utf8.DecodeRune(buf[i:])
		id, ok := t.lookup[string(buf[i:i+size])]
		if !ok {
			id = -1
		}
		n := int32(len(syms))
		syms = append(syms, symbol{start: int32(i), end: int32(i + size), prev: n - 1, next: n + 1, id: id})
		i += size
	}
	syms[len(syms)-1].next = -1
	s.syms = syms

	// Merge within segments that no piece can span (see Tokenizer.spaceSplit), each
	// with its own small heap: the result is the same as one heap over the
	// whole text, as merges in one segment never affect another.
	for lo := 0; lo < len(syms); {
		hi := lo + 1
		for hi < len(syms) && !(t.spaceSplit && buf[syms[hi].start] == ' ' && buf[syms[hi].start-1] != ' ') {
			hi++
		}
		t.mergeSPM(s, buf, int32(lo), int32(hi))
		lo = hi
	}

	for i := int32(0); i >= 0; i = syms[i].next {
		sym := syms[i]
		if sym.id >= 0 {
			dst = append(dst, int(sym.id))
			continue
		}
		if !t.byteFallback {
			dst = append(dst, t.unk)
			continue
		}
		for _, b := range buf[sym.start:sym.end] {
			dst = append(dst, int(t.byteTok[b]))
		}
	}
	return dst
}

// mergeSPM applies the merges of symbols [lo, hi) of s.syms, by score.
func (t *Tokenizer) mergeSPM(s *scratch, buf []byte, lo, hi int32) {
	syms := s.syms
	h := s.heap[:0]
	tryPair := func(l, r int32) {
		if l < lo || r < 0 || r >= hi || syms[l].id < 0 || syms[r].id < 0 {
			return
		}
		id, ok := t.lookup[string(buf[syms[l].start:syms[r].end])]
		if !ok {
			return
		}
		h.push(pair{key: float64(t.scores[id]), left: l, right: r, id: id, size: syms[r].end - syms[l].start})
	}
	for i := lo + 1; i < hi; i++ {
		tryPair(i-1, i)
	}
	for len(h) > 0 {
		p := h.pop()
		l, r := &syms[p.left], &syms[p.right]
		if l.start == l.end || r.start == r.end || r.end-l.start != p.size {
			continue // stale: one side has merged since
		}
		l.end, l.id = r.end, p.id
		r.end = r.start
		l.next = r.next
		if l.next >= 0 {
			syms[l.next].prev = p.left
		}
		tryPair(l.prev, p.left)
		tryPair(p.left, l.next)
	}
	s.heap = h
}

// pair is a candidate merge of two adjacent symbols.
type pair struct {
	key         float64 // priority: higher first
	left, right int32   // symbols
	id          int32   // token they merge into
	size        int32   // bytes they cover, to detect stale pairs
}

// pairHeap is a binary max-heap of pairs by key, then by smaller left.
type pairHeap []pair

func (p pair) before(q pair) bool {
	return p.key > q.key || p.key == q.key && p.left < q.left
}

func (h *pairHeap) push(p pair) {
	*h = append(*h, p)
	a := *h
	i := len(a) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !a[i].before(a[parent]) {
			break
		}
		a[i], a[parent] = a[parent], a[i]
		i = parent
	}
}

func (h *pairHeap) pop() pair {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(a) {
			break
		}
		m := l
		if r := l + 1; r < len(a) && a[r].before(a[l]) {
			m = r
		}
		if !a[m].before(a[i]) {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
