package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

var vocabFiles = map[string]struct {
	path string
	size int
}{
	"tok512":       {"models/stories260K/tok512.bin", 512},
	"llama2-32000": {"models/llama2-tokenizer/tokenizer.bin", 32000},
}

var (
	loadOnce   sync.Map // name -> *loaded
	handOnce   sync.Once
	handTok    *Tokenizer
	handTokErr error
)

type loaded struct {
	once sync.Once
	tok  *Tokenizer
	data []byte
	err  error
}

// llamaTok loads a shared llama2.c vocabulary once, or skips the test when
// the shared files are absent.
func llamaTok(t testing.TB, name string) *Tokenizer {
	tok, _ := llamaTokData(t, name)
	return tok
}

func llamaTokData(t testing.TB, name string) (*Tokenizer, []byte) {
	t.Helper()
	f, ok := vocabFiles[name]
	if !ok {
		t.Fatalf("unknown vocabulary %q", name)
	}
	v, _ := loadOnce.LoadOrStore(name, new(loaded))
	l := v.(*loaded)
	path := filepath.Join(modeltest.Dir(t), f.path)
	l.once.Do(func() {
		l.data, l.err = os.ReadFile(path)
		if l.err == nil {
			l.tok, l.err = ParseLlama2C(l.data, f.size)
		}
	})
	if os.IsNotExist(l.err) {
		t.Skipf("shared vocabulary %s is absent: %v", path, l.err)
	}
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.tok, l.data
}

// ggufStyle turns a llama2.c vocabulary into the Vocab a GGUF file holds:
// "▁" for spaces, <s> and </s> as control tokens, <unk> unknown, byte
// pieces typed as bytes. For tok512 this is exactly the tokenizer.ggml.*
// metadata of shared/models/stories260K/stories260K.gguf (tokens, types and
// scores were compared).
func ggufStyle(tok *Tokenizer) Vocab {
	v := Vocab{Model: "llama", BOS: 1, EOS: 2, UNK: 0, PAD: -1, AddBOS: true, AddSpacePrefix: true}
	for i, s := range tok.tokens {
		ty := TypeNormal
		switch {
		case i == 0:
			ty, s = TypeUnknown, "<unk>"
		case i == 1:
			ty, s = TypeControl, "<s>"
		case i == 2:
			ty, s = TypeControl, "</s>"
		case isBytePiece(s):
			ty = TypeByte
		default:
			s = strings.ReplaceAll(s, " ", "▁")
		}
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, ty)
	}
	v.Scores = tok.scores
	return v
}

// runcVocab is run.c's sorted_vocab: piece -> id.
func runcVocab(tok *Tokenizer) map[string]int {
	vocab := map[string]int{}
	for i, s := range tok.tokens {
		if _, dup := vocab[s]; !dup {
			vocab[s] = i
		}
	}
	return vocab
}

// withUserDefined adds a user-defined token "<tool>" to a vocabulary.
func withUserDefined(v Vocab) Vocab {
	v.Tokens = append(slices.Clone(v.Tokens), "<tool>")
	v.Scores = append(slices.Clone(v.Scores), 0)
	v.Types = append(slices.Clone(v.Types), TypeUserDefined)
	return v
}

// naiveSPM is llama2.c's run.c encode, transcribed literally (quadratic):
// the reference the heap-based encoder is compared with.
func naiveSPM(tok *Tokenizer, vocab map[string]int, text string, bos bool) []int {
	var ids []int
	if bos {
		ids = append(ids, 1)
	}
	if text != "" {
		ids = append(ids, vocab[" "])
	}
	for _, r := range text {
		if id, ok := vocab[string(r)]; ok {
			ids = append(ids, id)
			continue
		}
		for _, b := range []byte(string(r)) {
			ids = append(ids, int(b)+3)
		}
	}
	for {
		best, bestID, bestIdx := float32(-1e10), -1, -1
		for i := 0; i+1 < len(ids); i++ {
			id, ok := vocab[tok.tokens[ids[i]]+tok.tokens[ids[i+1]]]
			if ok && tok.scores[id] > best {
				best, bestID, bestIdx = tok.scores[id], id, i
			}
		}
		if bestIdx < 0 {
			return ids
		}
		ids[bestIdx] = bestID
		ids = append(ids[:bestIdx+1], ids[bestIdx+2:]...)
	}
}

// randomText draws a string from pieces that exercise the tokenizers:
// words, spaces and newlines, digits, contractions, punctuation, letters
// outside ASCII, emoji (byte fallback), combining marks, odd spaces.
func randomText(r *rand.Rand, n int) string {
	pieces := []string{
		"a", "e", "t", "s", "he", "the", " ", " ", " ", "  ", "\n", "\n\n", "\r\n", "\t",
		"Once", "upon", "time", "Hello", "world", "don", "'", "'s", "'T", "'re", "'ll", "'D", "'ve",
		"0", "1", "7", "42", "12345", ".", ",", "!", "?", "-", "$", "<", "|", "(", "`", "_", "\"",
		"é", "ü", "ß", "ñ", "中", "文", "日本", "Ж", "ω", "٣", "Ⅳ", "½", "\u0301", "\u00a0", "\u2009", "\u3000",
		"😀", "🦙", "👍🏽", "▁", "\x00", "<s>", "</s>",
	}
	var b strings.Builder
	for range n {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// handVocab builds a small byte-level BPE vocabulary: the 256 byte
// symbols, merges learned from a little corpus with the Llama 3
// pre-tokenizer, and special tokens.
func handVocab() Vocab {
	var toks []string
	for b := range 256 {
		toks = append(toks, string(byteRune[b]))
	}
	corpus := strings.Repeat("Once upon a time, there was a little girl named Lily. She liked to play "+
		"outside in the sunshine. One day she saw a big, red ball! \"Can I play?\" she asked. "+
		"The year 2024 had 366 days; I'm sure they'll say it's 12345 or 1,000,000.\n\n"+
		"Él está en la ciudad. Übermäßig schön. 中文字符 and 日本語 text. 😀😀 emoji!\n", 3)
	merges := learnMerges(corpus, 300)
	seen := map[string]bool{}
	for _, t := range toks {
		seen[t] = true
	}
	for _, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		if !seen[a+b] {
			seen[a+b] = true
			toks = append(toks, a+b)
		}
	}
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = TypeNormal
	}
	for _, sp := range []struct {
		text string
		typ  int32
	}{
		{"<|begin_of_text|>", TypeControl},
		{"<|end_of_text|>", TypeControl},
		{"<|eot_id|>", TypeControl},
		{"<tool>", TypeUserDefined},
	} {
		toks = append(toks, sp.text)
		types = append(types, sp.typ)
	}
	n := len(toks)
	return Vocab{
		Model: "gpt2", Pre: "llama-bpe", Tokens: toks, Types: types, Merges: merges,
		BOS: n - 4, EOS: n - 3, UNK: -1, PAD: -1, AddBOS: true,
	}
}

// learnMerges trains byte-level BPE: it repeatedly merges the most frequent
// adjacent pair (the first seen on ties) of the words of corpus.
func learnMerges(corpus string, n int) []string {
	p := preTokenizers["llama-bpe"]
	cps := decodeCodepoints(nil, corpus)
	words, _, _ := p.split(cps, nil, nil)
	var seqs [][]string
	for _, w := range words {
		var seq []string
		for _, b := range []byte(corpus[cps[w.lo].off:cps[w.hi].off]) {
			seq = append(seq, string(byteRune[b]))
		}
		seqs = append(seqs, seq)
	}
	var merges []string
	for range n {
		count := map[[2]string]int{}
		var order [][2]string
		for _, seq := range seqs {
			for i := 0; i+1 < len(seq); i++ {
				k := [2]string{seq[i], seq[i+1]}
				if count[k] == 0 {
					order = append(order, k)
				}
				count[k]++
			}
		}
		var best [2]string
		bestN := 1
		for _, k := range order {
			if count[k] > bestN {
				best, bestN = k, count[k]
			}
		}
		if bestN < 2 {
			break
		}
		merges = append(merges, best[0]+" "+best[1])
		for j, seq := range seqs {
			var out []string
			for i := 0; i < len(seq); i++ {
				if i+1 < len(seq) && seq[i] == best[0] && seq[i+1] == best[1] {
					out = append(out, best[0]+best[1])
					i++
				} else {
					out = append(out, seq[i])
				}
			}
			seqs[j] = out
		}
	}
	return merges
}

func handTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	handOnce.Do(func() { handTok, handTokErr = New(handVocab()) })
	if handTokErr != nil {
		t.Fatal(handTokErr)
	}
	return handTok
}

// naiveBPE encodes with the same pre-tokenizer and, per word, merges the
// lowest-ranked adjacent pair (leftmost on ties) by rescanning: the
// reference for the heap-based encoder.
func naiveBPE(tok *Tokenizer, v Vocab, text string) []int {
	rank := map[[2]string]int{}
	for i, m := range v.Merges {
		a, b, _ := strings.Cut(m, " ")
		if _, dup := rank[[2]string{a, b}]; !dup {
			rank[[2]string{a, b}] = i
		}
	}
	ids := map[string]int{}
	for i, s := range v.Tokens {
		ids[s] = i
	}
	cps := decodeCodepoints(nil, text)
	words, _, _ := tok.pre.split(cps, nil, nil)
	var out []int
	for _, w := range words {
		word := text[cps[w.lo].off:cps[w.hi].off]
		var enc strings.Builder
		var seq []string
		for _, b := range []byte(word) {
			seq = append(seq, string(byteRune[b]))
			enc.WriteRune(byteRune[b])
		}
		if id, ok := ids[enc.String()]; ok && tok.pre.ignoreMerges && v.Types[id] == TypeNormal {
			out = append(out, id)
			continue
		}
		for {
			best, at := -1, -1
			for i := 0; i+1 < len(seq); i++ {
				if r, ok := rank[[2]string{seq[i], seq[i+1]}]; ok && (best < 0 || r < best) {
					best, at = r, i
				}
			}
			if at < 0 {
				break
			}
			seq[at] += seq[at+1]
			seq = append(seq[:at+1], seq[at+2:]...)
		}
		for _, s := range seq {
			out = append(out, ids[s])
		}
	}
	return out
}
