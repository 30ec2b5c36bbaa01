package tokenizer

import (
	"bufio"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

// TestOracle reproduces run.c's encodings in shared/oracle/tokenizer.tsv.
func TestOracle(t *testing.T) {
	path := filepath.Join(modeltest.Dir(t), "oracle", "tokenizer.tsv")
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		t.Skipf("oracle %s is absent", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 3 {
			t.Fatalf("bad oracle line %q", sc.Text())
		}
		var want []int
		for _, s := range strings.Fields(cols[2]) {
			id, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		tok := llamaTok(t, cols[0])
		if got := tok.Encode(cols[1], true); !slices.Equal(got, want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", cols[0], cols[1], got, want)
		}
		if got := tok.Decode(want); got != cols[1] {
			t.Errorf("%s: Decode(%v) = %q, want %q", cols[0], want, got, cols[1])
		}
		lines++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines == 0 {
		t.Fatal("empty oracle")
	}
}

// TestLlamaReasoned checks encodings derived by hand from the vocabularies
// (ids looked up in the comments' tables): the dummy prefix " " is its own
// piece when nothing merges with it, characters without a piece fall back
// to <0xNN> = byte+3, and byte pieces never merge.
func TestLlamaReasoned(t *testing.T) {
	for _, tc := range []struct {
		vocab, text string
		want        []int
	}{
		{"tok512", "", []int{1}},
		{"tok512", "a", []int{1, 261}},                               // " a" = 261
		{"tok512", "\n", []int{1, 410, 13}},                          // " " = 410, <0x0A> = 13
		{"tok512", "é", []int{1, 410, 485}},                          // "é" = 485, no " é"
		{"tok512", "中", []int{1, 410, 0xE4 + 3, 0xB8 + 3, 0xAD + 3}}, // no "中"
		{"tok512", "😀", []int{1, 410, 0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3}},
		{"llama2-32000", "", []int{1}},
		{"llama2-32000", "\n", []int{1, 29871, 13}},   // "▁" = 29871
		{"llama2-32000", "é", []int{1, 904}},          // "▁é" = 904
		{"llama2-32000", "中", []int{1, 29871, 30275}}, // "中" = 30275, no "▁中"
		{"llama2-32000", "😀", []int{1, 29871, 243, 162, 155, 131}},
		{"llama2-32000", "Hello world", []int{1, 15043, 3186}}, // "▁Hello", "▁world"
	} {
		tok := llamaTok(t, tc.vocab)
		if got := tok.Encode(tc.text, true); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", tc.vocab, tc.text, got, tc.want)
		}
		if got := tok.Decode(tc.want); got != tc.text {
			t.Errorf("%s: Decode(%v) = %q, want %q", tc.vocab, tc.want, got, tc.text)
		}
		if got := tok.Encode(tc.text, false); !slices.Equal(got, tc.want[1:]) {
			t.Errorf("%s: Encode(%q, no BOS) = %v, want %v", tc.vocab, tc.text, got, tc.want[1:])
		}
	}
}

// TestLlamaMatchesRunC compares the heap-based encoder with a literal
// transcription of run.c's quadratic loop on random texts.
func TestLlamaMatchesRunC(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"tok512", "llama2-32000"} {
		tok := llamaTok(t, name)
		vocab := runcVocab(tok)
		for i := range 300 {
			text := randomText(r, 1+i%40)
			want := naiveSPM(tok, vocab, text, true)
			if got := tok.Encode(text, true); !slices.Equal(got, want) {
				t.Fatalf("%s: Encode(%q) = %v, run.c gives %v", name, text, got, want)
			}
		}
	}
}

// TestLlamaSpaceInsidePiece covers a vocabulary with a piece that spans a
// word start ("e t"), where merging cannot go word by word.
func TestLlamaSpaceInsidePiece(t *testing.T) {
	base := llamaTok(t, "tok512")
	if !base.spaceSplit || !llamaTok(t, "llama2-32000").spaceSplit {
		t.Fatal("the shared vocabularies should allow merging word by word")
	}
	v := Vocab{Model: "llama", Tokens: append(slices.Clone(base.tokens), "e t", "e the"),
		Scores: append(slices.Clone(base.scores), 0.5, 0.25), BOS: 1, EOS: 2, UNK: 0, PAD: -1, AddSpacePrefix: true}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if tok.spaceSplit {
		t.Fatal("spaceSplit with a piece \"e t\"")
	}
	vocab := runcVocab(tok)
	r := rand.New(rand.NewPCG(11, 12))
	texts := []string{"the the the", "He went to the park", "see the tree"}
	for i := range 300 {
		texts = append(texts, randomText(r, 1+i%40))
	}
	crossed := false
	for _, text := range texts {
		want := naiveSPM(tok, vocab, text, false)
		got := tok.Encode(text, false)
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, run.c gives %v", text, got, want)
		}
		crossed = crossed || slices.Contains(got, 512) || slices.Contains(got, 513)
		if d := tok.Decode(got); d != text {
			t.Fatalf("Decode(Encode(%q)) = %q", text, d)
		}
	}
	if !crossed {
		t.Error("no encoding used the pieces that span a word start")
	}
}

// TestGGUFStyleVocab builds the GGUF form of the llama2.c vocabularies
// ("▁" spaces, typed tokens) and checks it encodes and decodes identically.
func TestGGUFStyleVocab(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, name := range []string{"tok512", "llama2-32000"} {
		c := llamaTok(t, name)
		g, err := New(ggufStyle(c))
		if err != nil {
			t.Fatal(err)
		}
		texts := []string{"Once upon a time", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
			"", " ", "  two leading spaces", "trailing  ", "tab\there", "line\nbreak\r\n", "▁ literal"}
		for i := range 300 {
			texts = append(texts, randomText(r, 1+i%50))
		}
		for _, text := range texts {
			want := c.Encode(text, true)
			got := g.Encode(text, true)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: GGUF-style Encode(%q) = %v, llama2.c form gives %v", name, text, got, want)
			}
			if d := g.Decode(got); d != text {
				t.Fatalf("%s: GGUF-style Decode(Encode(%q)) = %q", name, text, d)
			}
		}
		if g.Token(1) != "<s>" || !g.IsControl(1) || g.Piece(1) != "" || g.Piece(13) != "\n" || !g.IsByte(13) {
			t.Errorf("%s: token 1 %q control %v piece %q; token 13 piece %q byte %v",
				name, g.Token(1), g.IsControl(1), g.Piece(1), g.Piece(13), g.IsByte(13))
		}
		// <s> written in the text is text, unless parsed as special.
		if got := g.Encode("<s>x", false); slices.Contains(got, 1) {
			t.Errorf("%s: Encode(\"<s>x\") = %v contains BOS", name, got)
		}
		if got := g.EncodeSpecial("<s>x", false); len(got) == 0 || got[0] != 1 ||
			!slices.Equal(got[1:], g.Encode("x", false)) {
			t.Errorf("%s: EncodeSpecial(\"<s>x\") = %v, want [1 %v...]", name, got, g.Encode("x", false))
		}
	}
}

// TestLlamaUserDefined checks that a user-defined token in the text is cut
// out and that, as in llama.cpp, the text after it gets the space prefix
// again, which Decode removes again.
func TestLlamaUserDefined(t *testing.T) {
	base := llamaTok(t, "tok512")
	tok, err := New(withUserDefined(ggufStyle(base)))
	if err != nil {
		t.Fatal(err)
	}
	const ud = 512
	got := tok.Encode("a<tool>b", true)
	want := slices.Concat([]int{1}, base.Encode("a", false), []int{ud}, base.Encode("b", false))
	if !slices.Equal(got, want) {
		t.Errorf("Encode(\"a<tool>b\") = %v, want %v", got, want)
	}
	for _, s := range []string{"a<tool>b", "<tool>", " <tool> x ", "<tool><tool>", "x<tool>", "<tool>  y", "<too<tool>l>"} {
		ids := tok.Encode(s, false)
		if !slices.Contains(ids, ud) {
			t.Errorf("Encode(%q) = %v lacks the user-defined token", s, ids)
		}
		if d := tok.Decode(ids); d != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, d)
		}
	}
	if got := tok.Piece(ud); got != "<tool>" || tok.Type(ud) != TypeUserDefined {
		t.Errorf("Piece(%d) = %q, type %d", ud, got, tok.Type(ud))
	}
}

func TestRoundTripLlama(t *testing.T) {
	texts := []string{"", " ", "  ", "\n", " leading", "trailing ", "a  b   c", "Ünïcödé ✓ 中文 😀👍🏽",
		"\x00nul", "tabs\t\tand\r\nCRLF", "invalid \xff\xfe utf8 \xe2\x82", "▁▁", "<s></s><unk>"}
	for _, name := range []string{"tok512", "llama2-32000"} {
		tok := llamaTok(t, name)
		for _, s := range texts {
			for _, bos := range []bool{false, true} {
				if got := tok.Decode(tok.Encode(s, bos)); got != s {
					t.Errorf("%s: Decode(Encode(%q, %v)) = %q", name, s, bos, got)
				}
			}
		}
	}
}

func TestDecoderStreaming(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	toks := map[string]*Tokenizer{"gpt2": handTokenizer(t)}
	for _, name := range []string{"tok512", "llama2-32000"} {
		toks[name] = llamaTok(t, name)
	}
	for name, tok := range toks {
		for i := range 200 {
			text := randomText(r, 1+i%30)
			ids := tok.Encode(text, i%2 == 0)
			d := tok.NewDecoder(-1)
			var b strings.Builder
			for _, id := range ids {
				s := d.Next(id)
				if !isWholeUTF8(s) && strings.ToValidUTF8(text, "") == text {
					t.Fatalf("%s: Next(%d) = %q splits a character (text %q)", name, id, s, text)
				}
				b.WriteString(s)
			}
			b.WriteString(d.Flush())
			if got, want := b.String(), tok.Decode(ids); got != want || got != text {
				t.Fatalf("%s: streamed %q, Decode %q, text %q", name, got, want, text)
			}
		}
	}
}

// isWholeUTF8 reports whether s is valid UTF-8 (no split characters).
func isWholeUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestDecoderAfterPrompt(t *testing.T) {
	tok := llamaTok(t, "llama2-32000")
	prompt := tok.Encode("Once upon a", true)
	rest := tok.Encode(" time there was 😀", false)[1:] // drop the dummy-prefix "▁"
	d := tok.NewDecoder(prompt[len(prompt)-1])
	var b strings.Builder
	for _, id := range rest {
		b.WriteString(d.Next(id))
	}
	b.WriteString(d.Flush())
	if got := b.String(); got != " time there was 😀" {
		t.Errorf("continuation decoded as %q", got)
	}
	// After BOS the leading space goes, as llama2.c prints it.
	d = tok.NewDecoder(tok.BOS())
	if got := d.Next(9038); got != "Once" { // "▁Once"
		t.Errorf("after BOS: %q, want \"Once\"", got)
	}
	if got := d.Next(2501); got != " upon" {
		t.Errorf("second piece: %q, want \" upon\"", got)
	}
	// Emoji split over byte tokens comes out whole.
	d = tok.NewDecoder(9038)
	var parts []string
	for _, id := range []int{243, 162, 155, 131} {
		parts = append(parts, d.Next(id))
	}
	if !slices.Equal(parts, []string{"", "", "", "😀"}) {
		t.Errorf("byte pieces streamed as %q", parts)
	}
	// An incomplete sequence comes out at Flush.
	d.Next(243)
	if got := d.Flush(); got != "\xf0" {
		t.Errorf("Flush = %q", got)
	}
}

func TestPieceAndAccessors(t *testing.T) {
	tok := llamaTok(t, "tok512")
	if tok.VocabSize() != 512 || tok.BOS() != 1 || tok.EOS() != 2 || tok.UNK() != 0 || tok.PAD() != -1 ||
		!tok.AddBOS() || !tok.AddSpacePrefix() || tok.Kind() != KindLlama {
		t.Errorf("accessors: size %d bos %d eos %d unk %d pad %d", tok.VocabSize(), tok.BOS(), tok.EOS(), tok.UNK(), tok.PAD())
	}
	for _, tc := range []struct {
		id    int
		piece string
		typ   int32
	}{
		{0, "", TypeUnknown}, {1, "", TypeControl}, {2, "", TypeControl}, {13, "\n", TypeByte},
		{261, " a", TypeNormal}, {-1, "", TypeUndefined}, {512, "", TypeUndefined},
	} {
		if got := tok.Piece(tc.id); got != tc.piece {
			t.Errorf("Piece(%d) = %q, want %q", tc.id, got, tc.piece)
		}
		if got := tok.Type(tc.id); got != tc.typ {
			t.Errorf("Type(%d) = %d, want %d", tc.id, got, tc.typ)
		}
	}
	if tok.Token(1) != "\n<s>\n" || tok.Token(9999) != "" {
		t.Errorf("Token(1) = %q", tok.Token(1))
	}
	if id, ok := tok.Lookup(" a"); !ok || id != 261 {
		t.Errorf("Lookup(\" a\") = %d, %v", id, ok)
	}
	if got := tok.Decode([]int{1, 261, -5, 99999, 2}); got != "a" {
		t.Errorf("Decode with bad ids = %q", got)
	}
}

func llama2cImage(maxLen int32, toks ...string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(maxLen))
	for i, s := range toks {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(-float32(i)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

func TestLoadLlama2CErrors(t *testing.T) {
	dir := modeltest.Dir(t)
	path := filepath.Join(dir, "models/stories260K/tok512.bin")
	if _, err := os.Stat(path); err == nil {
		_, err := LoadLlama2C(path, 32000)
		if err == nil || err.Error() != "tokenizer: tok512.bin holds 512 tokens but the model has 32000" {
			t.Errorf("vocab mismatch error = %v", err)
		}
		if _, err := LoadLlama2C(path, 100); err == nil || !strings.Contains(err.Error(), "holds 512 tokens but the model has 100") {
			t.Errorf("vocab mismatch error = %v", err)
		}
	}
	if _, err := LoadLlama2C(filepath.Join(dir, "no-such-file.bin"), 10); err == nil {
		t.Error("missing file: no error")
	}
	good := llama2cImage(5, "<unk>", "<s>", "</s>", "a")
	bytes := []string{"<unk>", "<s>", "</s>"}
	for b := range 256 {
		bytes = append(bytes, "<0x"+strings.ToUpper(strconv.FormatUint(uint64(b)|0x100, 16)[1:])+">")
	}
	for _, tc := range []struct {
		name string
		data []byte
		n    int
		want string
	}{
		{"empty", nil, 4, "too short"},
		{"negative max", llama2cImage(-1, "a"), 1, "negative"},
		{"truncated entry", good[:len(good)-3], 4, "truncated"},
		{"past end", good[:len(good)-1], 4, "runs past the end"},
		{"too long", llama2cImage(1, "ab"), 1, "outside [0, max_token_length 1]"},
		{"fewer", llama2cImage(6, bytes...), 300, "holds 259 tokens but the model has 300"},
		{"zero vocab", good, 0, "not positive"},
		{"no byte tokens", llama2cImage(5, "<unk>", "<s>", "</s>", "a"), 4, ""},
		{"duplicate", llama2cImage(6, append(bytes, "a", "a")...), 261, "duplicate token \"a\""},
		{"bytes but no unk", llama2cImage(6, "<s>", "</s>", "a"), 3, ""},
	} {
		_, err := ParseLlama2C(tc.data, tc.n)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	hv := handVocab()
	lv := func() Vocab {
		return Vocab{Model: "llama", Tokens: []string{"<unk>", "<s>", "</s>", "▁a", "▁", "a"}, Scores: []float32{0, 0, 0, -1, -2, -3},
			Types: []int32{2, 3, 3, 1, 1, 1}, BOS: 1, EOS: 2, UNK: 0, PAD: -1, AddSpacePrefix: true}
	}
	for _, tc := range []struct {
		name string
		edit func(*Vocab)
		base func() Vocab
		want string
	}{
		{"unknown model", func(v *Vocab) { v.Model = "bert" }, lv, `unknown tokenizer model "bert"`},
		{"no tokens", func(v *Vocab) { v.Tokens, v.Scores, v.Types = nil, nil, nil; v.BOS, v.EOS, v.UNK = -1, -1, -1 }, lv, "no tokens"},
		{"scores", func(v *Vocab) { v.Scores = v.Scores[:2] }, lv, "2 scores for 6 tokens"},
		{"no scores", func(v *Vocab) { v.Scores = nil }, lv, "no scores"},
		{"nan", func(v *Vocab) { v.Scores[3] = float32(math.NaN()) }, lv, "NaN"},
		{"types", func(v *Vocab) { v.Types = v.Types[:1] }, lv, "1 token types for 6 tokens"},
		{"bad type", func(v *Vocab) { v.Types[3] = 9 }, lv, "invalid type 9"},
		{"bos range", func(v *Vocab) { v.BOS = 6 }, lv, "BOS id 6 is outside"},
		{"pad range", func(v *Vocab) { v.PAD = -2 }, lv, "PAD id -2 is outside"},
		{"no unk", func(v *Vocab) { v.UNK = -1; v.Types[0] = 3 }, lv, "neither byte tokens"},
		{"bad byte", func(v *Vocab) { v.Types[3] = TypeByte }, lv, "not spelled <0xNN>"},
		{"partial bytes", func(v *Vocab) { v.Tokens[3], v.Types[3] = "<0x41>", TypeByte }, lv, "lacks <0x00>"},
		{"duplicate", func(v *Vocab) { v.Tokens[2] = "▁a" }, lv, "duplicate token"},
		{"pre", func(v *Vocab) { v.Pre = "klingon" }, handVocab, `unsupported pre-tokenizer "klingon"`},
		{"merge no space", func(v *Vocab) { v.Merges = []string{"ab"} }, handVocab, "not two tokens"},
		{"merge operand", func(v *Vocab) { v.Merges = []string{"zz q"} }, handVocab, `"zz" is not a token`},
		{"merge result", func(v *Vocab) { v.Merges = []string{"q z"} }, handVocab, `"qz" is not a token`},
		{"missing byte symbol", func(v *Vocab) { v.Tokens[0] = "Ā-" }, handVocab, "lacks the token \"Ā\" for byte 0x00"},
	} {
		v := tc.base()
		tc.edit(&v)
		_, err := New(v)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(hv); err != nil {
		t.Fatal(err)
	}
	// A SentencePiece vocabulary without byte tokens encodes unknown
	// characters as UNK (" a" merges, "€" has no piece).
	tok, err := New(lv())
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("a€", false); !slices.Equal(got, []int{3, 0}) {
		t.Errorf("no byte fallback: %v", got)
	}
}

// TestLongTextInPieces lowers the fragment limit to check that text
// beyond it is encoded in pieces cut at character boundaries.
func TestLongTextInPieces(t *testing.T) {
	defer func(n int) { maxFragment = n }(maxFragment)
	maxFragment = 7
	toks := map[string]*Tokenizer{"gpt2": handTokenizer(t), "tok512": llamaTok(t, "tok512")}
	for name, tok := range toks {
		for _, s := range []string{"Hello, world! Once upon a time", "😀😀😀😀 über", "  spaces  "} {
			ids := tok.Encode(s, true)
			if got := tok.Decode(ids); got != s {
				t.Errorf("%s: Decode(Encode(%q)) = %q", name, s, got)
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		model, pre       string
		bos, spacePrefix bool
	}{
		{"llama", "", true, true},
		{"gpt2", "llama-bpe", true, false},
		{"gpt2", "qwen2", false, false},
		{"gpt2", "smollm", false, false},
		{"gpt2", "", false, false},
		{"bert", "", false, false},
	} {
		bos, sp := Defaults(tc.model, tc.pre)
		if bos != tc.bos || sp != tc.spacePrefix {
			t.Errorf("Defaults(%q, %q) = %v, %v", tc.model, tc.pre, bos, sp)
		}
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := llamaTok(t, "llama2-32000")
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	want := tok.Encode(text, true)
	done := make(chan []int)
	for range 4 {
		go func() {
			var got []int
			for range 20 {
				got = tok.Encode(text, true)
			}
			done <- got
		}()
	}
	for range 4 {
		if got := <-done; !slices.Equal(got, want) {
			t.Fatal("concurrent Encode differs")
		}
	}
}

// GGUFVocab gives back a vocabulary that builds the same tokenizer, in
// the form stories260K.gguf stores (▁ for spaces, plain <s> and </s>).
func TestGGUFVocabRoundTrip(t *testing.T) {
	for name := range vocabFiles {
		tok := llamaTok(t, name)
		v := tok.GGUFVocab()
		if v.Tokens[1] != "<s>" || v.Tokens[2] != "</s>" || v.Types[1] != TypeControl || v.Types[0] != TypeUnknown {
			t.Fatalf("%s: specials %q %q types %v", name, v.Tokens[1], v.Tokens[2], v.Types[:3])
		}
		back, err := New(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range []string{"Once upon a time", "Hello, world!\n  two  spaces", "é 中 🙂"} {
			a, b := tok.Encode(s, true), back.Encode(s, true)
			if !slices.Equal(a, b) || back.Decode(b) != tok.Decode(a) {
				t.Errorf("%s: %q encodes to %v, rebuilt %v", name, s, a, b)
			}
		}
	}
}

// TestEncodeContinuation checks that a text encoded to be inserted in the
// middle of another has no dummy space prefix: its tokens are those the
// longer text has after the point of insertion.
func TestEncodeContinuation(t *testing.T) {
	tok, err := LoadLlama2C(modeltest.Path(t, modeltest.Tok512), 512)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ before, insert string }{{"Lily was happy.", " Wait,"}, {"Tom", " and Sue"}} {
		whole := tok.Encode(c.before+c.insert, false)
		head := tok.Encode(c.before, false)
		got := tok.EncodeContinuation(c.insert)
		if !slices.Equal(whole[len(head):], got) {
			t.Errorf("%q after %q: EncodeContinuation %v, the whole text has %v after %v", c.insert, c.before, got, whole[len(head):], head)
		}
		if tok.Decode(got) != c.insert && tok.Decode(got) != strings.TrimPrefix(c.insert, " ") {
			t.Errorf("EncodeContinuation(%q) decodes to %q", c.insert, tok.Decode(got))
		}
		if plain := tok.Encode(c.insert, false); len(plain) <= len(got) {
			t.Logf("%q: Encode %v, EncodeContinuation %v", c.insert, plain, got)
		}
	}
}

// TestDecoderClone checks that a clone goes on from its original's state
// (a held-back half character included) and independently of it.
func TestDecoderClone(t *testing.T) {
	tok := llamaTok(t, "llama2-32000")
	d := tok.NewDecoder(tok.BOS())
	c0 := d.Clone() // at the start: the first piece loses its space
	d.Next(9038)
	d.Next(243) // half of 😀
	c := d.Clone()
	if got := c.Next(162) + c.Next(155) + c.Next(131); got != "😀" {
		t.Errorf("clone completed %q, want 😀", got)
	}
	if got := d.Flush(); got != "\xf0" {
		t.Errorf("the original's held bytes after its clone went on: %q", got)
	}
	if got := c0.Next(9038); got != "Once" {
		t.Errorf("a clone at the start: %q, want \"Once\"", got)
	}
}
