package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// byteRune is GPT-2's byte-to-unicode alphabet: printable Latin-1 bytes
// stand for themselves, the other 68 bytes (controls, space, 0x7F-0xA0,
// 0xAD) for U+0100 onwards in byte order, so that a space is "Ġ" (U+0120)
// and a newline "Ċ" (U+010A).
var byteRune [256]rune

// runeByte inverts byteRune; -1 for runes outside the alphabet.
var runeByte [324]int16

func init() {
	next := rune(256)
	for b := range 256 {
		if '!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = next
			next++
		}
	}
	for i := range runeByte {
		runeByte[i] = -1
	}
	for b, r := range byteRune {
		runeByte[r] = int16(b)
	}
}

// decodeByteLevel maps a token spelled in the byte alphabet back to bytes.
// Runes outside the alphabet are kept as they are.
func decodeByteLevel(s string) string {
	var b []byte
	for _, r := range s {
		if r >= 0 && int(r) < len(runeByte) && runeByte[r] >= 0 {
			b = append(b, byte(runeByte[r]))
		} else {
			b = utf8.AppendRune(b, r)
		}
	}
	return string(b)
}

// initGPT2 sets up a byte-level BPE vocabulary: token text in the byte
// alphabet, merges "left right" by rank.
func (t *Tokenizer) initGPT2(v Vocab, ids map[string]int32) error {
	pre := v.Pre
	if pre == "" {
		pre = "default"
	}
	p, ok := preTokenizers[pre]
	if !ok {
		return fmt.Errorf("tokenizer: unsupported pre-tokenizer %q for a gpt2 vocabulary", v.Pre)
	}
	t.pre = p

	n := len(t.tokens)
	t.pieces = make([]string, n)
	t.lookup = make(map[string]int32, n)
	for i, s := range t.tokens {
		switch t.types[i] {
		case TypeNormal:
			p := decodeByteLevel(s)
			t.pieces[i] = p
			if _, dup := t.lookup[p]; !dup && p != "" {
				t.lookup[p] = int32(i)
			}
		case TypeUserDefined:
			t.pieces[i] = s
		case TypeByte:
			if !isBytePiece(s) {
				return fmt.Errorf("tokenizer: token %d %q has the byte type but is not spelled <0xNN>", i, s)
			}
			t.pieces[i] = string([]byte{hexByte(s)})
		}
	}
	for b := range 256 {
		sym := string(byteRune[b])
		id, ok := ids[sym]
		if !ok {
			return fmt.Errorf("tokenizer: byte-level vocabulary lacks the token %q for byte 0x%02X", sym, b)
		}
		if t.types[id] != TypeNormal {
			return fmt.Errorf("tokenizer: token %d %q for byte 0x%02X has type %d, not normal", id, sym, b, t.types[id])
		}
		t.byteTok[b] = id
	}

	t.merges = make(map[uint64]merge, len(v.Merges))
	var ab []byte
	for rank, m := range v.Merges {
		sp := -1
		if len(m) > 1 {
			sp = strings.IndexByte(m[1:], ' ')
		}
		if sp < 0 {
			return fmt.Errorf("tokenizer: merge %d %q is not two tokens separated by a space", rank, m)
		}
		a, b := m[:sp+1], m[sp+2:]
		ia, oka := ids[a]
		ib, okb := ids[b]
		ab = append(append(ab[:0], a...), b...)
		ic, okc := ids[string(ab)]
		switch {
		case !oka:
			return fmt.Errorf("tokenizer: merge %d %q: %q is not a token", rank, m, a)
		case !okb:
			return fmt.Errorf("tokenizer: merge %d %q: %q is not a token", rank, m, b)
		case !okc:
			return fmt.Errorf("tokenizer: merge %d %q: %q is not a token", rank, m, a+b)
		}
		key := uint64(ia)<<32 | uint64(ib)
		if _, dup := t.merges[key]; !dup {
			t.merges[key] = merge{rank: int32(rank), id: ic}
		}
	}
	return nil
}

// encodeBPE encodes one raw fragment with byte-level BPE: the
// pre-tokenizer splits it into words, and each word starts as one symbol
// per byte and merges the adjacent pair of lowest rank, leftmost first on
// ties, until no pair has a merge (llama.cpp's llm_tokenizer_bpe). With
// ignoreMerges (Llama 3), a word that is a token is taken whole.
func (t *Tokenizer) encodeBPE(dst []int, s *scratch, text string) []int {
	var words []span
	s.cps = decodeCodepoints(s.cps[:0], text)
	words, s.spans, s.spans2 = t.pre.split(s.cps, s.spans, s.spans2)
	for _, w := range words {
		word := text[s.cps[w.lo].off:s.cps[w.hi].off]
		dst = t.bpeWord(dst, s, word)
	}
	return dst
}

func (t *Tokenizer) bpeWord(dst []int, s *scratch, word string) []int {
	if len(word) == 1 {
		return append(dst, int(t.byteTok[word[0]]))
	}
	if t.pre.ignoreMerges {
		if id, ok := t.lookup[word]; ok {
			return append(dst, int(id))
		}
	}
	syms := s.syms[:0]
	for i := range len(word) {
		n := int32(i)
		syms = append(syms, symbol{start: n, end: n + 1, prev: n - 1, next: n + 1, id: t.byteTok[word[i]]})
	}
	syms[len(syms)-1].next = -1
	s.syms = syms

	h := s.heap[:0]
	tryPair := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		m, ok := t.merges[uint64(syms[l].id)<<32|uint64(syms[r].id)]
		if !ok {
			return
		}
		h.push(pair{key: -float64(m.rank), left: l, right: r, id: m.id, size: syms[r].end - syms[l].start})
	}
	for i := 1; i < len(syms); i++ {
		tryPair(int32(i-1), int32(i))
	}
	for len(h) > 0 {
		p := h.pop()
		l, r := &syms[p.left], &syms[p.right]
		if l.start == l.end || r.start == r.end || r.end-l.start != p.size {
			continue
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
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, int(syms[i].id))
	}
	return dst
}
