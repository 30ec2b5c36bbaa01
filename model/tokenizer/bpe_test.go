package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// words splits text with the named pre-tokenizer.
func words(t *testing.T, pre, text string) []string {
	t.Helper()
	p, ok := preTokenizers[pre]
	if !ok {
		t.Fatalf("no pre-tokenizer %q", pre)
	}
	cps := decodeCodepoints(nil, text)
	spans, _, _ := p.split(cps, nil, nil)
	var out []string
	for _, s := range spans {
		out = append(out, text[cps[s.lo].off:cps[s.hi].off])
	}
	return out
}

func TestPreTokenizerSplits(t *testing.T) {
	for _, tc := range []struct {
		pre, text string
		want      []string
	}{
		{"llama-bpe", "Hello world", []string{"Hello", " world"}},
		{"llama-bpe", "12345", []string{"123", "45"}},
		{"llama-bpe", "I'm", []string{"I", "'m"}},
		{"llama-bpe", "DON'T", []string{"DON", "'T"}},
		{"llama-bpe", "they'll've", []string{"they", "'ll", "'ve"}},
		{"llama-bpe", "a  b", []string{"a", " ", " b"}},
		{"llama-bpe", "a   \n\nb", []string{"a", "   \n\n", "b"}},
		{"llama-bpe", "x!!\n\ny", []string{"x", "!!\n\n", "y"}},
		{"llama-bpe", "  end  ", []string{" ", " end", "  "}},
		{"llama-bpe", "\tfoo", []string{"\tfoo"}},
		{"llama-bpe", "\nfoo", []string{"\n", "foo"}},
		{"llama-bpe", "über 中文", []string{"über", " 中文"}},
		{"llama-bpe", "(hello)", []string{"(hello", ")"}},
		{"llama-bpe", "3.14", []string{"3", ".", "14"}},
		{"llama-bpe", "$100", []string{"$", "100"}},
		{"llama-bpe", " 😀!", []string{" 😀!"}},
		{"llama-bpe", "x \n y", []string{"x", " \n", " y"}},
		{"qwen2", "12345", []string{"1", "2", "3", "4", "5"}},
		{"qwen2", "I'M", []string{"I", "'M"}},
		{"gpt2", "Hello world", []string{"Hello", " world"}},
		{"gpt2", "12345 67", []string{"12345", " 67"}},
		{"gpt2", "I'M", []string{"I", "'", "M"}},
		{"gpt2", "it's", []string{"it", "'s"}},
		{"gpt2", "a  b", []string{"a", " ", " b"}},
		{"gpt2", "a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"gpt2", "x!! !!", []string{"x", "!!", " !!"}},
		{"gpt2", "end   ", []string{"end", "   "}},
		{"smollm", "abc 123", []string{"abc", " ", "1", "2", "3"}},
		{"smollm", "x2y", []string{"x", "2", "y"}},
		{"default", "Hello, world! 12345", []string{"Hello", ",", " world", "!", " ", "123", "45"}},
		{"default", "a<=b", []string{"a", "<=", "b"}},
		{"falcon", "`x` 1234", []string{"`", "x", "`", " ", "123", "4"}},
	} {
		if got := words(t, tc.pre, tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%s: split(%q) = %q, want %q", tc.pre, tc.text, got, tc.want)
		}
	}
}

// TestPreTokenizerMatchesRegex compares the hand-written splitters with
// the regular expressions they implement, run by a backtracking engine.
// As in llama.cpp, text between matches is a piece too.
func TestPreTokenizerMatchesRegex(t *testing.T) {
	const contractions = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
	for _, tc := range []struct{ pre, re string }{
		{"llama-bpe", contractions + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
		{"qwen2", contractions + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
		{"gpt2", `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`},
	} {
		re := regexp2.MustCompile(tc.re, regexp2.None)
		r := rand.New(rand.NewPCG(7, 8))
		for i := range 2000 {
			text := randomText(r, 1+i%25)
			want := regexSplit(t, re, text)
			if got := words(t, tc.pre, text); !slices.Equal(got, want) {
				t.Fatalf("%s: split(%q) = %q, regex gives %q", tc.pre, text, got, want)
			}
		}
	}
}

func regexSplit(t *testing.T, re *regexp2.Regexp, text string) []string {
	runes := []rune(text)
	var out []string
	prev := 0
	m, err := re.FindStringMatch(text)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		if m.Index > prev {
			out = append(out, string(runes[prev:m.Index]))
		}
		if m.Length > 0 {
			out = append(out, string(runes[m.Index:m.Index+m.Length]))
		}
		prev = m.Index + m.Length
	}
	if err != nil {
		t.Fatal(err)
	}
	if prev < len(runes) {
		out = append(out, string(runes[prev:]))
	}
	return out
}

// byteVocab is a byte-level vocabulary with the 256 byte symbols plus the
// given tokens and merges.
func byteVocab(pre string, extra, merges []string) Vocab {
	var toks []string
	for b := range 256 {
		toks = append(toks, string(byteRune[b]))
	}
	toks = append(toks, extra...)
	return Vocab{Model: "gpt2", Pre: pre, Tokens: toks, Merges: merges, BOS: -1, EOS: -1, UNK: -1, PAD: -1}
}

func TestBPEMergeOrder(t *testing.T) {
	v := byteVocab("gpt2", []string{"bc", "ab", "aa", "abc", "Ġa", "Ġaa"}, []string{"b c", "a b", "a a", "Ġ a", "Ġa a"})
	// Ranks: "b c" 0, "a b" 1, "a a" 2, "Ġ a" 3, "Ġa a" 4.
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) int {
		i, ok := tok.Lookup(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return i
	}
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"abc", []string{"a", "bc"}},   // "b c" ranks before "a b"
		{"aaa", []string{"aa", "a"}},   // leftmost on a tie
		{"aaaa", []string{"aa", "aa"}}, // after the first merge, the next pair
		{"ab", []string{"ab"}},
		{" aaa", []string{" ", "aa", "a"}}, // "a a" (rank 2) before "Ġ a" (rank 3), and "Ġ aa" is no merge
		{" ab", []string{" ", "ab"}},       // "a b" (rank 1) before "Ġ a" (rank 3)
		{" a", []string{" a"}},
		{"x", []string{"x"}},
	} {
		var want []int
		for _, s := range tc.want {
			want = append(want, id(s))
		}
		if got := tok.Encode(tc.text, false); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v (%q)", tc.text, got, want, tc.want)
		}
	}

	// Llama 3 takes a word that is a token whole; dbrx (same regex) merges.
	v.Pre = "llama-bpe"
	l3, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := l3.Encode("abc", false); !slices.Equal(got, []int{id("abc")}) {
		t.Errorf("llama-bpe Encode(\"abc\") = %v, want [%d]", got, id("abc"))
	}
	v.Pre = "dbrx"
	dbrx, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := dbrx.Encode("abc", false); !slices.Equal(got, []int{id("a"), id("bc")}) {
		t.Errorf("dbrx Encode(\"abc\") = %v", got)
	}
}

func TestBPEMatchesNaive(t *testing.T) {
	v := handVocab()
	tok := handTokenizer(t)
	if len(v.Merges) < 150 {
		t.Fatalf("only %d merges learned", len(v.Merges))
	}
	r := rand.New(rand.NewPCG(9, 10))
	texts := []string{"Once upon a time, there was a little girl named Lily.", "The year 2024 had 366 days",
		"I'm sure they'll say it's 12345", "中文字符 and 日本語 text. 😀😀 emoji!"}
	for i := range 500 {
		texts = append(texts, randomText(r, 1+i%40))
	}
	merged := 0
	for _, text := range texts {
		want := naiveBPE(tok, v, text)
		got := tok.Encode(text, false)
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, naive BPE gives %v", text, got, want)
		}
		if d := tok.Decode(got); d != text {
			t.Fatalf("Decode(Encode(%q)) = %q", text, d)
		}
		if len(got) < len(text) {
			merged++
		}
	}
	if merged == 0 {
		t.Fatal("no text was shortened by merges")
	}
}

func TestBPESpecialTokens(t *testing.T) {
	tok := handTokenizer(t)
	eot := tok.EOS() + 1 // "<|eot_id|>"
	tool := eot + 1      // "<tool>", user-defined
	if tok.Token(eot) != "<|eot_id|>" || tok.Token(tool) != "<tool>" {
		t.Fatalf("tokens %q %q", tok.Token(eot), tok.Token(tool))
	}
	text := "hi<|eot_id|>there<tool>x"
	plain := tok.Encode(text, true)
	if plain[0] != tok.BOS() || slices.Contains(plain, eot) || !slices.Contains(plain, tool) {
		t.Errorf("Encode(%q) = %v: want BOS first, no control token, the user-defined one", text, plain)
	}
	if got := tok.Decode(plain); got != text {
		t.Errorf("Decode(Encode) = %q", got)
	}
	special := tok.EncodeSpecial(text, false)
	want := slices.Concat(tok.Encode("hi", false), []int{eot}, tok.Encode("there", false), []int{tool}, tok.Encode("x", false))
	if !slices.Equal(special, want) {
		t.Errorf("EncodeSpecial(%q) = %v, want %v", text, special, want)
	}
	if got := tok.Decode(special); got != "hithere<tool>x" {
		t.Errorf("Decode(EncodeSpecial) = %q: control tokens should vanish", got)
	}
	if got := tok.EncodeSpecial("<|begin_of_text|><|begin_of_text|>", false); !slices.Equal(got, []int{tok.BOS(), tok.BOS()}) {
		t.Errorf("two BOS = %v", got)
	}
	if tok.AddBOS() != true || tok.AddSpacePrefix() || tok.Kind() != KindGPT2 {
		t.Errorf("AddBOS %v AddSpacePrefix %v Kind %v", tok.AddBOS(), tok.AddSpacePrefix(), tok.Kind())
	}
	// Byte-level pieces: "Ġ" is a space; half an emoji is half its bytes.
	if id, ok := tok.Lookup(" the"); !ok || tok.Piece(id) != " the" || tok.Token(id) != "Ġthe" {
		t.Errorf("Lookup(\" the\") = %d, %v; piece %q token %q", id, ok, tok.Piece(id), tok.Token(id))
	}
	if p := tok.Piece(int(tok.byteTok[0xF0])); p != "\xf0" || utf8.ValidString(p) {
		t.Errorf("byte 0xF0 piece %q", p)
	}
}

func TestRoundTripBPE(t *testing.T) {
	tok := handTokenizer(t)
	for _, s := range []string{"", " ", "\n\n\n", "  lead", "trail  ", "🦙 llama 3 tokenizer's test: 1234567!",
		"invalid \xff\xfe\xe2\x82", strings.Repeat("ab ", 100)} {
		if got := tok.Decode(tok.Encode(s, true)); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
	}
}
