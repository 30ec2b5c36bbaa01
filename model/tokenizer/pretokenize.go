package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Character classes of the pre-tokenizer regular expressions.
const (
	clsOther  uint8 = iota // [^\s\p{L}\p{N}]; also invalid UTF-8 bytes
	clsLetter              // \p{L}
	clsNumber              // \p{N}
	clsSpace               // \s (Unicode White_Space)
)

// codepoint is one decoded character of a text fragment.
type codepoint struct {
	off int   // byte offset in the fragment
	r   rune  // utf8.RuneError for an invalid byte
	cls uint8 // clsOther, ...
}

// span is a range [lo, hi) of codepoints.
type span struct{ lo, hi int }

var asciiClass [utf8.RuneSelf]uint8

func init() {
	for r := range rune(utf8.RuneSelf) {
		asciiClass[r] = classOf(r)
	}
}

func classOf(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// decodeCodepoints appends the codepoints of text to dst, plus a sentinel
// whose off is len(text).
func decodeCodepoints(dst []codepoint, text string) []codepoint {
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			dst = append(dst, codepoint{i, rune(c), asciiClass[c]})
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		cls := clsOther
		if size > 1 || r != utf8.RuneError {
			cls = classOf(r)
		}
		dst = append(dst, codepoint{i, r, cls})
		i += size
	}
	return append(dst, codepoint{off: len(text)})
}

// stage is one pass of a pre-tokenizer: it splits each span further. The
// passes mirror the list of regular expressions llama.cpp applies in turn
// (llama-vocab.cpp), where both the matches and the text between them
// become pieces.
type stage uint8

const (
	// Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
	//          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	// (Qwen2: \p{N} instead of \p{N}{1,3}; the digit count is a parameter).
	stageLlama3 stage = iota
	// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	stageGPT2
	// \p{N}: every digit on its own (SmolLM, StarCoder).
	stageEachDigit
	// [\p{P}\$\+<=>\^~\|]+ (and ` with falcon).
	stagePunctRuns
	// \p{N}+
	stageDigitRuns
	// [0-9][0-9][0-9]
	stageASCIITriples
)

type preTokenizer struct {
	stages       []stage
	digits       int  // stageLlama3: longest run of digits in one piece
	backtick     bool // stagePunctRuns: ` is punctuation too
	ignoreMerges bool // a word that is a token is not merged
	addBOS       bool // llama.cpp's default for add_bos_token
}

// preTokenizers maps tokenizer.ggml.pre to the pre-tokenizer, following
// llama.cpp's llama-vocab.cpp for the families this package implements.
var preTokenizers = map[string]*preTokenizer{}

func init() {
	llama3 := &preTokenizer{stages: []stage{stageLlama3}, digits: 3, ignoreMerges: true, addBOS: true}
	llama3NoIgnore := &preTokenizer{stages: []stage{stageLlama3}, digits: 3}
	qwen2 := &preTokenizer{stages: []stage{stageLlama3}, digits: 1}
	gpt2 := &preTokenizer{stages: []stage{stageGPT2}}
	smollm := &preTokenizer{stages: []stage{stageEachDigit, stageGPT2}}
	falcon := &preTokenizer{stages: []stage{stagePunctRuns, stageGPT2, stageASCIITriples}, backtick: true}
	deflt := &preTokenizer{stages: []stage{stagePunctRuns, stageGPT2, stageDigitRuns, stageASCIITriples}}
	for _, family := range []struct {
		p     *preTokenizer
		names []string
	}{
		{llama3, []string{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"}},
		{llama3NoIgnore, []string{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}},
		{qwen2, []string{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "kormo", "f2llmv2"}},
		{gpt2, []string{"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "exaone4", "roberta-bpe",
			"jina-es", "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code",
			"gigachat", "a.x-4.0", "mellum", "modern-bert", "granite-docling"}},
		{smollm, []string{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"}},
		{falcon, []string{"falcon"}},
		{deflt, []string{"default"}},
	} {
		for _, name := range family.names {
			preTokenizers[name] = family.p
		}
	}
}

// split returns the words of a fragment decoded by decodeCodepoints (with
// its sentinel) as spans of cps, using a and b as scratch space; it returns
// the scratch slices to keep.
func (p *preTokenizer) split(cps []codepoint, a, b []span) (words, a2, b2 []span) {
	cur := append(a[:0], span{0, len(cps) - 1})
	next := b
	for _, st := range p.stages {
		next = next[:0]
		for _, sp := range cur {
			next = p.apply(st, cps[:sp.hi], sp.lo, next)
		}
		cur, next = next, cur
	}
	return cur, cur, next
}

// apply splits cps[lo:] (the end of cps is the end of the text for
// look-ahead) by one stage and appends the pieces to out.
func (p *preTokenizer) apply(st stage, cps []codepoint, lo int, out []span) []span {
	switch st {
	case stageLlama3:
		return splitLlama3(cps, lo, p.digits, out)
	case stageGPT2:
		return splitGPT2(cps, lo, out)
	case stageEachDigit:
		return splitRuns(cps, lo, out, func(c codepoint) bool { return c.cls == clsNumber }, true)
	case stagePunctRuns:
		return splitRuns(cps, lo, out, func(c codepoint) bool {
			switch c.r {
			case '$', '+', '<', '=', '>', '^', '~', '|':
				return true
			case '`':
				return p.backtick
			}
			return unicode.IsPunct(c.r)
		}, false)
	case stageDigitRuns:
		return splitRuns(cps, lo, out, func(c codepoint) bool { return c.cls == clsNumber }, false)
	case stageASCIITriples:
		return splitTriples(cps, lo, out)
	}
	return append(out, span{lo, len(cps)})
}

// contraction returns the length (2 or 3) of 's 't 're 've 'm 'll 'd at
// cps[p], or 0; fold accepts upper-case letters too.
func contraction(cps []codepoint, p int, fold bool) int {
	if cps[p].r != '\'' || p+1 >= len(cps) {
		return 0
	}
	lower := func(r rune) rune {
		if fold && 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	switch lower(cps[p+1].r) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if p+2 < len(cps) {
		switch a, b := lower(cps[p+1].r), lower(cps[p+2].r); {
		case a == 'r' && b == 'e', a == 'v' && b == 'e', a == 'l' && b == 'l':
			return 3
		}
	}
	return 0
}

// whitespace returns the end of \s*[\r\n]+ | \s+(?!\S) | \s+ at cps[p],
// a whitespace character; newlines selects the first alternative (Llama 3).
func whitespace(cps []codepoint, p int, newlines bool) int {
	e, lastNL := p, -1
	for e < len(cps) && cps[e].cls == clsSpace {
		if r := cps[e].r; r == '\r' || r == '\n' {
			lastNL = e
		}
		e++
	}
	switch {
	case newlines && lastNL >= 0:
		return lastNL + 1 // \s*[\r\n]+
	case e == len(cps) || e-p == 1:
		return e // \s+(?!\S) up to the end, or \s+
	default:
		return e - 1 // \s+(?!\S): leave the last one to start the next word
	}
}

func splitLlama3(cps []codepoint, lo, digits int, out []span) []span {
	n := len(cps)
	class := func(i int) uint8 {
		if i < n {
			return cps[i].cls
		}
		return 0xFF
	}
	for p := lo; p < n; {
		c := cps[p]
		var q int
		if k := contraction(cps, p, true); k > 0 {
			q = p + k
		} else if c.cls == clsLetter || c.r != '\r' && c.r != '\n' && c.cls != clsNumber && class(p+1) == clsLetter {
			q = p + 1 // [^\r\n\p{L}\p{N}]?\p{L}+
			for class(q) == clsLetter {
				q++
			}
		} else if c.cls == clsNumber {
			q = p + 1 // \p{N}{1,digits}
			for q-p < digits && class(q) == clsNumber {
				q++
			}
		} else if c.cls == clsOther || c.r == ' ' && class(p+1) == clsOther {
			q = p + 1 //  ?[^\s\p{L}\p{N}]+[\r\n]*
			for class(q) == clsOther {
				q++
			}
			for q < n && (cps[q].r == '\r' || cps[q].r == '\n') {
				q++
			}
		} else {
			q = whitespace(cps, p, true)
		}
		out = append(out, span{p, q})
		p = q
	}
	return out
}

func splitGPT2(cps []codepoint, lo int, out []span) []span {
	n := len(cps)
	class := func(i int) uint8 {
		if i < n {
			return cps[i].cls
		}
		return 0xFF
	}
	for p := lo; p < n; {
		c := cps[p]
		var q int
		if k := contraction(cps, p, false); k > 0 {
			q = p + k
		} else if cls := c.cls; cls != clsSpace || c.r == ' ' && class(p+1) != clsSpace && p+1 < n {
			//  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
			if cls == clsSpace {
				cls = class(p + 1)
			}
			q = p + 1
			for class(q) == cls {
				q++
			}
		} else {
			q = whitespace(cps, p, false)
		}
		out = append(out, span{p, q})
		p = q
	}
	return out
}

// splitRuns splits cps[lo:] into maximal runs of characters that do and do
// not match; with single, each matching character is a piece of its own.
func splitRuns(cps []codepoint, lo int, out []span, match func(codepoint) bool, single bool) []span {
	n := len(cps)
	for p := lo; p < n; {
		m := match(cps[p])
		q := p + 1
		if !(m && single) {
			for q < n && match(cps[q]) == m {
				q++
			}
		}
		out = append(out, span{p, q})
		p = q
	}
	return out
}

// splitTriples splits out the matches of [0-9][0-9][0-9], leftmost first.
func splitTriples(cps []codepoint, lo int, out []span) []span {
	n := len(cps)
	digit := func(i int) bool { return '0' <= cps[i].r && cps[i].r <= '9' }
	gap := lo
	for p := lo; p < n; {
		if p+2 < n && digit(p) && digit(p+1) && digit(p+2) {
			if gap < p {
				out = append(out, span{gap, p})
			}
			out = append(out, span{p, p + 3})
			p += 3
			gap = p
			continue
		}
		p++
	}
	if gap < n {
		out = append(out, span{gap, n})
	}
	return out
}
