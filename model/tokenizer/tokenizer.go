package tokenizer

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Kind names a tokenizer model, as stored in the GGUF key tokenizer.ggml.model.
type Kind string

const (
	// KindLlama is SentencePiece-style BPE over pieces with scores (Llama 1
	// and 2, Mistral, TinyLlama, llama2.c).
	KindLlama Kind = "llama"
	// KindGPT2 is byte-level BPE with ranked merges (GPT-2, Llama 3, Qwen2,
	// SmolLM).
	KindGPT2 Kind = "gpt2"
)

// Token types, as stored in the GGUF key tokenizer.ggml.token_type.
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Vocab is a tokenizer vocabulary as a model loader reads it from GGUF
// metadata (the tokenizer.ggml.* keys) or from a llama2.c tokenizer.bin.
type Vocab struct {
	// Model is tokenizer.ggml.model: "llama" (SentencePiece BPE with
	// scores) or "gpt2" (byte-level BPE with merges).
	Model string
	// Pre is tokenizer.ggml.pre and chooses the pre-tokenizer of a "gpt2"
	// vocabulary ("llama-bpe", "qwen2", "smollm", "gpt-2", "default", ...;
	// empty means "default"). Ignored for "llama".
	Pre string
	// Tokens is tokenizer.ggml.tokens: the text of each token. In a "llama"
	// vocabulary a space is written "▁" (U+2581), as in GGUF files; in a
	// "gpt2" vocabulary bytes are written in GPT-2's byte-to-unicode
	// alphabet ("Ġ" for a space).
	Tokens []string
	// Scores is tokenizer.ggml.scores, one per token; required for "llama"
	// (higher merges first), ignored for "gpt2".
	Scores []float32
	// Types is tokenizer.ggml.token_type, one per token (see TypeNormal and
	// the other Type constants). When nil, types are inferred: UNK is
	// unknown, BOS and EOS are control, a "llama" piece spelled <0xNN> is a
	// byte, everything else is normal.
	Types []int32
	// Merges is tokenizer.ggml.merges for "gpt2": "left right" per entry,
	// rank = index (lower merges first).
	Merges []string
	// Special token ids; -1 when absent.
	BOS, EOS, UNK, PAD int
	// AddBOS is tokenizer.ggml.add_bos_token; see Defaults for the value to
	// use when the key is absent. It is reported by Tokenizer.AddBOS, and
	// Encode takes the decision as an argument.
	AddBOS bool
	// AddSpacePrefix is tokenizer.ggml.add_space_prefix (SentencePiece's
	// dummy prefix): a space is put before the text of a "llama" encoding.
	// See Defaults for the value to use when the key is absent. Ignored for
	// "gpt2", as llama.cpp does.
	AddSpacePrefix bool
}

// Defaults returns llama.cpp's values of add_bos_token and add_space_prefix
// for a model whose GGUF metadata lacks those keys.
func Defaults(model, pre string) (addBOS, addSpacePrefix bool) {
	switch Kind(model) {
	case KindLlama:
		return true, true
	case KindGPT2:
		if p, ok := preTokenizers[pre]; ok {
			return p.addBOS, false
		}
	}
	return false, false
}

// Tokenizer encodes text to token ids and decodes ids to text. It is safe
// for concurrent use.
type Tokenizer struct {
	kind   Kind
	tokens []string  // vocabulary text as given
	pieces []string  // the bytes each token stands for when decoded
	scores []float32 // llama: merge priority
	types  []int32

	// lookup maps the bytes of a token that text can be encoded to
	// (normal and, for llama, user-defined tokens) to its id.
	lookup map[string]int32
	// byteTok is the token of each byte: <0xNN> for llama (-1 when the
	// vocabulary has none), the one-symbol token for gpt2.
	byteTok      [256]int32
	byteFallback bool // llama: byteTok is complete
	// spaceSplit (llama) is set when no piece has a space right after
	// another character, so that no merge crosses the start of a word (a
	// space after a non-space) and words can be merged one by one.
	spaceSplit bool

	merges    map[uint64]merge // gpt2: (left id, right id) -> merge
	pre       *preTokenizer    // gpt2
	preName   string           // gpt2: tokenizer.ggml.pre as given
	mergeList []string         // gpt2: tokenizer.ggml.merges as given (not copied)

	bos, eos, unk, pad     int
	addBOS, addSpacePrefix bool

	// userDefined and special list the tokens that are cut out of the text
	// before it is tokenized, longest first: user-defined tokens always,
	// control and unknown ones too with EncodeSpecial.
	userDefined, special []int32

	// whole[i] reports whether pieces[i] ends on a complete UTF-8 sequence.
	whole []bool

	pool sync.Pool // *scratch
}

type merge struct{ rank, id int32 }

// New checks a vocabulary and builds a tokenizer from it.
func New(v Vocab) (*Tokenizer, error) {
	kind := Kind(v.Model)
	if kind != KindLlama && kind != KindGPT2 {
		return nil, fmt.Errorf("tokenizer: unknown tokenizer model %q", v.Model)
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: %s vocabulary has no tokens", kind)
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("tokenizer: %d tokens is too many", n)
	}
	t := &Tokenizer{
		kind:           kind,
		tokens:         slices.Clone(v.Tokens),
		bos:            v.BOS,
		eos:            v.EOS,
		unk:            v.UNK,
		pad:            v.PAD,
		addBOS:         v.AddBOS,
		addSpacePrefix: v.AddSpacePrefix && kind == KindLlama,
		preName:        v.Pre,
		mergeList:      v.Merges,
	}
	for _, sp := range []struct {
		name string
		id   int
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"UNK", v.UNK}, {"PAD", v.PAD}} {
		if sp.id < -1 || sp.id >= n {
			return nil, fmt.Errorf("tokenizer: %s id %d is outside the vocabulary [0, %d)", sp.name, sp.id, n)
		}
	}

	switch {
	case kind == KindLlama && v.Scores == nil:
		return nil, fmt.Errorf("tokenizer: llama vocabulary has no scores")
	case v.Scores != nil && len(v.Scores) != n:
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(v.Scores), n)
	case v.Types != nil && len(v.Types) != n:
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	if kind == KindLlama {
		for i, s := range v.Scores {
			if math.IsNaN(float64(s)) {
				return nil, fmt.Errorf("tokenizer: score of token %d %q is NaN", i, v.Tokens[i])
			}
		}
		t.scores = slices.Clone(v.Scores)
	}

	t.types = make([]int32, n)
	if v.Types != nil {
		for i, ty := range v.Types {
			if ty < TypeUndefined || ty > TypeByte {
				return nil, fmt.Errorf("tokenizer: token %d %q has invalid type %d", i, v.Tokens[i], ty)
			}
		}
		copy(t.types, v.Types)
	} else {
		for i, s := range v.Tokens {
			switch {
			case i == v.UNK:
				t.types[i] = TypeUnknown
			case i == v.BOS || i == v.EOS:
				t.types[i] = TypeControl
			case kind == KindLlama && isBytePiece(s):
				t.types[i] = TypeByte
			default:
				t.types[i] = TypeNormal
			}
		}
	}

	// Raw text -> id, to find duplicates and, for gpt2, merge operands.
	ids := make(map[string]int32, n)
	for i, s := range v.Tokens {
		if s == "" {
			continue
		}
		if j, dup := ids[s]; dup {
			return nil, fmt.Errorf("tokenizer: duplicate token %q at ids %d and %d", s, j, i)
		}
		ids[s] = int32(i)
	}

	var err error
	if kind == KindLlama {
		err = t.initLlama()
	} else {
		err = t.initGPT2(v, ids)
	}
	if err != nil {
		return nil, err
	}

	t.whole = make([]bool, n)
	for i, p := range t.pieces {
		t.whole[i] = incompleteTail([]byte(p)) == len(p)
	}
	for i, ty := range t.types {
		if v.Tokens[i] == "" {
			continue
		}
		switch ty {
		case TypeUserDefined:
			t.userDefined = append(t.userDefined, int32(i))
			t.special = append(t.special, int32(i))
		case TypeControl, TypeUnknown:
			t.special = append(t.special, int32(i))
		}
	}
	longestFirst := func(a, b int32) int { return len(t.tokens[b]) - len(t.tokens[a]) }
	slices.SortStableFunc(t.userDefined, longestFirst)
	slices.SortStableFunc(t.special, longestFirst)
	t.pool.New = func() any { return new(scratch) }
	return t, nil
}

// initLlama sets up a SentencePiece vocabulary: pieces with "▁" for spaces,
// <0xNN> byte pieces, scores.
func (t *Tokenizer) initLlama() error {
	n := len(t.tokens)
	t.pieces = make([]string, n)
	t.lookup = make(map[string]int32, n)
	for i := range t.byteTok {
		t.byteTok[i] = -1
	}
	nbytes := 0
	t.spaceSplit = true
	for i, s := range t.tokens {
		switch t.types[i] {
		case TypeNormal, TypeUserDefined:
			p := s
			if t.types[i] == TypeNormal {
				p = strings.ReplaceAll(s, "▁", " ")
			}
			t.pieces[i] = p
			if _, dup := t.lookup[p]; !dup && p != "" {
				t.lookup[p] = int32(i)
				if spaceInside(p) {
					t.spaceSplit = false
				}
			}
		case TypeByte:
			if !isBytePiece(s) {
				return fmt.Errorf("tokenizer: token %d %q has the byte type but is not spelled <0xNN>", i, s)
			}
			b := hexByte(s)
			if t.byteTok[b] >= 0 {
				return fmt.Errorf("tokenizer: byte 0x%02X has two tokens, %d and %d", b, t.byteTok[b], i)
			}
			t.byteTok[b] = int32(i)
			t.pieces[i] = string([]byte{b})
			nbytes++
		}
	}
	switch {
	case nbytes == 256:
		t.byteFallback = true
	case nbytes > 0:
		for b, id := range t.byteTok {
			if id < 0 {
				return fmt.Errorf("tokenizer: llama vocabulary has %d byte tokens but lacks <0x%02X>", nbytes, b)
			}
		}
	case t.unk < 0:
		return fmt.Errorf("tokenizer: llama vocabulary has neither byte tokens <0x00>..<0xFF> nor an unknown token, so some text cannot be encoded")
	}
	return nil
}

// spaceInside reports whether a space follows another character in p.
func spaceInside(p string) bool {
	for k := 1; k < len(p); k++ {
		if p[k] == ' ' && p[k-1] != ' ' {
			return true
		}
	}
	return false
}

// isBytePiece reports whether s is spelled <0xNN> with upper-case hex digits.
func isBytePiece(s string) bool {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return false
	}
	isHex := func(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }
	return isHex(s[3]) && isHex(s[4])
}

func hexByte(s string) byte {
	h := func(c byte) byte {
		if c <= '9' {
			return c - '0'
		}
		return c - 'A' + 10
	}
	return h(s[3])<<4 | h(s[4])
}

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Kind returns the tokenizer model.
func (t *Tokenizer) Kind() Kind { return t.kind }

// BOS returns the beginning-of-sequence token, or -1.
func (t *Tokenizer) BOS() int { return t.bos }

// EOS returns the end-of-sequence token, or -1.
func (t *Tokenizer) EOS() int { return t.eos }

// UNK returns the unknown token, or -1.
func (t *Tokenizer) UNK() int { return t.unk }

// PAD returns the padding token, or -1.
func (t *Tokenizer) PAD() int { return t.pad }

// AddBOS reports whether the model expects a BOS token before a prompt.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddSpacePrefix reports whether encoding puts a space before the text
// (SentencePiece's dummy prefix), which decoding removes again.
func (t *Tokenizer) AddSpacePrefix() bool { return t.addSpacePrefix }

// Type returns the type of token id (TypeNormal, TypeControl, ...), or
// TypeUndefined for an id outside the vocabulary.
func (t *Tokenizer) Type(id int) int32 {
	if id < 0 || id >= len(t.types) {
		return TypeUndefined
	}
	return t.types[id]
}

// IsControl reports whether id is a control token (BOS, EOS, chat markers),
// which decodes to no text.
func (t *Tokenizer) IsControl(id int) bool { return t.Type(id) == TypeControl }

// IsByte reports whether id is a byte-fallback token <0xNN>.
func (t *Tokenizer) IsByte(id int) bool { return t.Type(id) == TypeByte }

// Token returns the vocabulary text of token id as stored ("▁the",
// "<0x0A>", "Ġthe", "<|eot_id|>"), or "" for an id outside the vocabulary.
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// GGUFVocab returns the vocabulary as a GGUF file's tokenizer.ggml.* keys
// store it, so that a model written with it loads the same tokenizer: for
// SentencePiece, pieces with "▁" for a space and the special pieces named
// plainly (llama2.c's "\n<s>\n" becomes "<s>"), with their scores and
// token types.
func (t *Tokenizer) GGUFVocab() Vocab {
	v := Vocab{
		Model: string(t.kind), Tokens: make([]string, len(t.tokens)), Types: slices.Clone(t.types),
		BOS: t.bos, EOS: t.eos, UNK: t.unk, PAD: t.pad, AddBOS: t.addBOS, AddSpacePrefix: t.addSpacePrefix,
	}
	if t.scores != nil {
		v.Scores = slices.Clone(t.scores)
	}
	if t.kind == KindGPT2 {
		v.Pre, v.Merges = t.preName, t.mergeList
	}
	for id, tok := range t.tokens {
		switch {
		case t.kind != KindLlama:
		case id == t.bos || id == t.eos || id == t.unk || id == t.pad:
			tok = strings.TrimSpace(tok)
			if id != t.unk {
				v.Types[id] = TypeControl
			}
		case v.Types[id] == TypeNormal || v.Types[id] == TypeUserDefined:
			tok = strings.ReplaceAll(tok, " ", "▁")
		}
		v.Tokens[id] = tok
	}
	return v
}

// Piece returns the bytes token id stands for: its text with spaces for
// "▁", the raw byte of a <0xNN> token, the bytes of a byte-level token.
// Control, unknown and unused tokens, and ids outside the vocabulary, give "".
// A byte token or a byte-level token can hold part of a UTF-8 sequence;
// use a Decoder to stream text.
func (t *Tokenizer) Piece(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Lookup returns the normal token (or, for "llama", user-defined token)
// whose Piece is s, if there is one.
func (t *Tokenizer) Lookup(s string) (int, bool) {
	id, ok := t.lookup[s]
	return int(id), ok
}

// NewLlamaVocab returns the start of a SentencePiece ("llama") vocabulary
// laid out as Llama 2's: <unk> (0), <s> (1, BOS), </s> (2, EOS), then the
// 256 byte pieces <0x00>..<0xFF> that let any text be encoded, with BOS
// and the dummy space prefix added to a text. Callers Add their pieces.
func NewLlamaVocab() *Vocab {
	v := &Vocab{Model: string(KindLlama), UNK: 0, BOS: 1, EOS: 2, PAD: -1, AddBOS: true, AddSpacePrefix: true}
	v.Add("<unk>", TypeUnknown, 0)
	v.Add("<s>", TypeControl, 0)
	v.Add("</s>", TypeControl, 0)
	for b := 0; b < 256; b++ {
		v.Add(fmt.Sprintf("<0x%02X>", b), TypeByte, 0)
	}
	return v
}

// Add appends a piece with its type and score.
func (v *Vocab) Add(piece string, typ int32, score float32) {
	v.Tokens = append(v.Tokens, piece)
	v.Types = append(v.Types, typ)
	v.Scores = append(v.Scores, score)
}
