package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

// fuzzTokenizers returns the tokenizers the round-trip fuzzer checks: the
// hand-made byte-level one always, the shared SentencePiece ones (llama2.c
// and GGUF forms, and GGUF with a user-defined token) when their files are
// present.
func fuzzTokenizers(tb testing.TB) map[string]*Tokenizer {
	toks := map[string]*Tokenizer{"gpt2-hand": handTokenizer(tb)}
	for name, f := range vocabFiles {
		if _, err := os.Stat(filepath.Join(modeltest.Dir(tb), f.path)); err != nil {
			continue
		}
		tok := llamaTok(tb, name)
		toks[name] = tok
		g, err := New(ggufStyle(tok))
		if err != nil {
			tb.Fatal(err)
		}
		toks[name+"-gguf"] = g
		if u, err := New(withUserDefined(ggufStyle(tok))); err != nil {
			tb.Fatal(err)
		} else {
			toks[name+"-gguf-ud"] = u
		}
	}
	return toks
}

// FuzzRoundTrip checks Decode(Encode(s)) == s for every tokenizer and any
// string (valid UTF-8 or not), that streaming decoding agrees with Decode,
// and, for the llama2.c vocabularies and valid UTF-8, that the encoding is
// run.c's.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", " ", "Once upon a time", "Hello, world!", "  two spaces", "trailing ",
		"\n", "a\n\nb\r\n", "tab\tx", "12345 67", "I'm they'll DON'T", "über 中文 😀👍🏽", "▁", "\x00",
		"<s>x</s>", "<|begin_of_text|>hi<tool>", "\xff\xfe", "\xe2\x82", strings.Repeat("ab ", 50)} {
		f.Add(s, true)
		f.Add(s, false)
	}
	toks := fuzzTokenizers(f)
	naive := map[string]map[string]int{}
	for name := range vocabFiles {
		if tok, ok := toks[name]; ok {
			naive[name] = runcVocab(tok)
		}
	}
	f.Fuzz(func(t *testing.T, s string, bos bool) {
		for name, tok := range toks {
			ids := tok.Encode(s, bos)
			if got := tok.Decode(ids); got != s {
				t.Fatalf("%s: Decode(Encode(%q, %v)) = %q (ids %v)", name, s, bos, got, ids)
			}
			d := tok.NewDecoder(-1)
			var b strings.Builder
			for _, id := range ids {
				b.WriteString(d.Next(id))
			}
			b.WriteString(d.Flush())
			if b.String() != s {
				t.Fatalf("%s: streamed %q, want %q", name, b.String(), s)
			}
			if vocab, ok := naive[name]; ok && len(s) <= 256 && utf8.ValidString(s) {
				if want := naiveSPM(tok, vocab, s, bos); !slices.Equal(ids, want) {
					t.Fatalf("%s: Encode(%q) = %v, run.c gives %v", name, s, ids, want)
				}
			}
		}
	})
}

// FuzzLoadLlama2C feeds arbitrary bytes to the llama2.c loader: it must
// return an error or a working tokenizer, never panic or allocate more
// than the input justifies.
func FuzzLoadLlama2C(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join(modeltest.Dir(f), vocabFiles["tok512"].path)); err == nil {
		f.Add(data, uint16(512))
		f.Add(data[:len(data)/2], uint16(512))
	}
	var bytes []string
	for b := range 256 {
		bytes = append(bytes, "<0x"+strings.ToUpper(string("0123456789abcdef"[b>>4])+string("0123456789abcdef"[b&15]))+">")
	}
	full := llama2cImage(8, slices.Concat([]string{"<unk>", "<s>", "</s>"}, bytes, []string{" ", "a", " a", "b", "ab", " ab"})...)
	f.Add(full, uint16(265))
	f.Add(llama2cImage(3, "<unk>", "<s>", "</s>", "a"), uint16(4))
	f.Add(llama2cImage(1, "a", "b"), uint16(2))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f}, uint16(1))
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		tok, err := ParseLlama2C(data, int(n))
		if err != nil {
			return
		}
		if tok.VocabSize() != int(n) {
			t.Fatalf("VocabSize %d, want %d", tok.VocabSize(), n)
		}
		for _, s := range []string{"", "ab ab", "a\nb 😀", "\xff"} {
			ids := tok.Encode(s, true)
			for _, id := range ids {
				if id < 0 || id >= int(n) {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", s, id, n)
				}
			}
			if got := tok.Decode(ids); tok.byteFallback && got != s {
				t.Fatalf("Decode(Encode(%q)) = %q", s, got)
			}
		}
	})
}
