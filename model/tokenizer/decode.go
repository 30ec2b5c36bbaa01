package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Decode returns the text of a token sequence: the concatenation of each
// token's Piece, where control and unknown tokens and ids outside the
// vocabulary give nothing. When the vocabulary adds a space prefix (a
// "llama" vocabulary with AddSpacePrefix), the space that Encode put before
// the text is removed again: one leading space of the first token at the
// start of the sequence, and of the first token after a control or
// user-defined token (where Encode adds the prefix again, as llama.cpp
// does). Hence Decode(Encode(s, bos)) == s for every string s, including
// ones that start with spaces, provided the vocabulary has byte tokens (a
// vocabulary without them encodes unknown characters as UNK).
func (t *Tokenizer) Decode(ids []int) string {
	var b strings.Builder
	n := 0
	for _, id := range ids {
		if id >= 0 && id < len(t.pieces) {
			n += len(t.pieces[id])
		}
	}
	b.Grow(n)
	atStart := true
	for _, id := range ids {
		b.WriteString(t.piece(id, &atStart))
	}
	return b.String()
}

// piece returns the text of id in a sequence, removing the space prefix
// when *atStart, and updates *atStart: true at the start of a sequence and
// after a control or user-defined token.
func (t *Tokenizer) piece(id int, atStart *bool) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	p := t.pieces[id]
	switch t.types[id] {
	case TypeControl, TypeUserDefined:
		*atStart = true
		return p
	case TypeUnknown:
		return p
	}
	if *atStart && p != "" {
		*atStart = false
		if t.addSpacePrefix && p[0] == ' ' {
			p = p[1:]
		}
	}
	return p
}

// Decoder turns a stream of tokens into text, one token at a time, as a
// generation loop produces them. It removes the space prefix as Decode does
// and holds back the bytes of a UTF-8 sequence that is split across tokens
// (byte-fallback tokens <0xE2><0x82><0xAC>, or a byte-level token holding
// half a character) until it is complete, so every string it returns is
// whole characters. The concatenation of Next for every token and then
// Flush equals Decode of the whole sequence.
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	t       *Tokenizer
	atStart bool
	pending []byte // an incomplete UTF-8 sequence, at most 3 bytes
	buf     []byte
}

// NewDecoder returns a Decoder for the tokens that follow token prev: pass
// the last token already decoded or fed to the model (the last prompt
// token), or -1 at the start of a sequence. After BOS, or at the start,
// the first piece loses its space prefix, as in llama2.c's decode.
func (t *Tokenizer) NewDecoder(prev int) *Decoder {
	d := &Decoder{t: t, atStart: true}
	if prev >= 0 {
		d.atStart = false
		d.t.piece(prev, &d.atStart)
	}
	return d
}

// Next returns the text that token id completes; it may be empty while
// part of a character is held back.
func (d *Decoder) Next(id int) string {
	p := d.t.piece(id, &d.atStart)
	if len(d.pending) == 0 && id >= 0 && id < len(d.t.whole) && d.t.whole[id] {
		return p // no allocation for the common case
	}
	d.buf = append(append(d.buf[:0], d.pending...), p...)
	cut := incompleteTail(d.buf)
	d.pending = append(d.pending[:0], d.buf[cut:]...)
	return string(d.buf[:cut])
}

// Clone returns a Decoder in d's state that goes on independently (a text
// that branches: each branch continues its own copy).
func (d *Decoder) Clone() *Decoder {
	return &Decoder{t: d.t, atStart: d.atStart, pending: append([]byte(nil), d.pending...)}
}

// Flush returns the bytes held back (a UTF-8 sequence that was never
// completed) and empties the Decoder's buffer.
func (d *Decoder) Flush() string {
	s := string(d.pending)
	d.pending = d.pending[:0]
	return s
}

// incompleteTail returns the length of b without a trailing UTF-8 sequence
// that is incomplete but could still be completed by more bytes; invalid
// bytes are not held back.
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if b[i]&0xC0 != 0x80 { // not a continuation byte: the start of the last sequence
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
