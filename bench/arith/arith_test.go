package arith

import (
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/synth"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// The arith data sets, relative to ../shared.
const (
	testFile  = "data/arith/test.jsonl"
	trainFile = "data/arith/train.jsonl.gz"
)

// handProblems are problems of the task written out here, using every
// phrasing of the generator, for the tests that run without ../shared.
var handProblems = []bench.GSM8KProblem{
	{
		Question: "Ben has 31 cards. Then Ben doubles the cards. Then Ben doubles the cards. He sells 34 cards. How many cards does Ben have now?",
		Answer:   "Ben has 2 * 31 = 62 cards.\nBen has 2 * 62 = 124 cards.\nBen has 124 - 34 = 90 cards.\n#### 90",
	},
	{
		Question: "Gus has 30 pens. He loses 22 pens. Then Gus doubles the pens. He buys 7 bags with 10 pens in each bag. He gives 66 pens to Zoe. How many pens does Gus have now?",
		Answer:   "Gus has 30 - 22 = 8 pens.\nGus has 2 * 8 = 16 pens.\nThe bags hold 7 * 10 = 70 pens. Gus has 16 + 70 = 86 pens.\nGus has 86 - 66 = 20 pens.\n#### 20",
	},
	{
		Question: "Quin has 99 stickers. She finds 7 more stickers. She buys 12 more stickers. She gets 5 stickers from Oli. How many stickers does Quin have now?",
		Answer:   "Quin has 99 + 7 = 106 stickers.\nQuin has 106 + 12 = 118 stickers.\nQuin has 118 + 5 = 123 stickers.\n#### 123",
	},
	{
		Question: "Uma has 10 marbles. She buys 9 bags with 12 marbles in each bag. How many marbles does Uma have now?",
		Answer:   "The bags hold 9 * 12 = 108 marbles. Uma has 10 + 108 = 118 marbles.\n#### 118",
	},
}

func newTok(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestPromptCompletion(t *testing.T) {
	if got, want := Prompt("How many?"), "Question: How many?\nAnswer:"; got != want {
		t.Errorf("Prompt = %q, want %q", got, want)
	}
	if got, want := Completion("#### 4"), " #### 4"; got != want {
		t.Errorf("Completion = %q, want %q", got, want)
	}
}

func TestVocabLayout(t *testing.T) {
	v, err := Vocab()
	if err != nil {
		t.Fatal(err)
	}
	n := len(v.Tokens)
	t.Logf("vocabulary: %d tokens (259 special and byte pieces, %d normal pieces)", n, n-259)
	if n > 1024 {
		t.Errorf("vocabulary of %d tokens; it should stay small", n)
	}
	if len(v.Scores) != n || len(v.Types) != n {
		t.Fatalf("%d tokens, %d scores, %d types", n, len(v.Scores), len(v.Types))
	}
	if v.Model != "llama" || v.UNK != 0 || v.BOS != 1 || v.EOS != 2 || v.PAD != -1 || !v.AddBOS || !v.AddSpacePrefix {
		t.Errorf("vocabulary header %q unk %d bos %d eos %d pad %d addBOS %v addSpacePrefix %v",
			v.Model, v.UNK, v.BOS, v.EOS, v.PAD, v.AddBOS, v.AddSpacePrefix)
	}
	for i, want := range map[int]string{0: "<unk>", 1: "<s>", 2: "</s>", 3: "<0x00>", 3 + '\n': "<0x0A>", 258: "<0xFF>"} {
		if v.Tokens[i] != want {
			t.Errorf("token %d = %q, want %q", i, v.Tokens[i], want)
		}
	}
	wantTypes := map[int]int32{0: tokenizer.TypeUnknown, 1: tokenizer.TypeControl, 2: tokenizer.TypeControl, 3: tokenizer.TypeByte, 258: tokenizer.TypeByte, 259: tokenizer.TypeNormal, n - 1: tokenizer.TypeNormal}
	for i, ty := range wantTypes {
		if v.Types[i] != ty {
			t.Errorf("token %d %q has type %d, want %d", i, v.Tokens[i], v.Types[i], ty)
		}
	}
	for i := 259; i < n; i++ {
		p := v.Tokens[i]
		if v.Types[i] != tokenizer.TypeNormal {
			t.Errorf("piece %d %q has type %d", i, p, v.Types[i])
		}
		if strings.ContainsAny(p, "0123456789") && len([]rune(p)) > 1 {
			t.Errorf("piece %d %q holds a digit with something else", i, p)
		}
		if i > 259 && v.Scores[i] > v.Scores[i-1] {
			t.Errorf("piece %d %q scores %g, above the %g of the piece before", i, p, v.Scores[i], v.Scores[i-1])
		}
	}
	v2, err := Vocab()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Tokens, v2.Tokens) || !slices.Equal(v.Scores, v2.Scores) || !slices.Equal(v.Types, v2.Types) {
		t.Error("Vocab differs between two calls")
	}
	v2.Tokens[300] = "changed"
	if v3, _ := Vocab(); v3.Tokens[300] == "changed" {
		t.Error("Vocab returns shared slices")
	}
}

func TestDigits(t *testing.T) {
	tok := newTok(t)
	space, ok := tok.Lookup(" ")
	if !ok {
		t.Fatal(`no piece "▁"`)
	}
	digit := make(map[rune]int)
	for d := '0'; d <= '9'; d++ {
		id, ok := tok.Lookup(string(d))
		if !ok {
			t.Fatalf("digit %c is not a piece", d)
		}
		digit[d] = id
	}
	for _, n := range []int{0, 7, 10, 42, 99, 100, 123, 555, 909, 999, 1000, 31415926, 1234567890} {
		s := strconv.Itoa(n)
		want := []int{space}
		for _, d := range s {
			want = append(want, digit[d])
		}
		// Mid-text, after a space; and at the start, where the dummy prefix
		// puts the same space.
		if got := tok.Encode("has "+s, false); !slices.Equal(got[1:], want) {
			t.Errorf("%q encodes to %v, want [▁has] %v", "has "+s, pieces(tok, got), pieces(tok, want))
		}
		if got := tok.Encode(s, false); !slices.Equal(got, want) {
			t.Errorf("%q encodes to %v, want %v", s, pieces(tok, got), pieces(tok, want))
		}
		// After a newline, or an operator, no space.
		if got := tok.Encode("#### 1\n"+s+".", false); !slices.Equal(got[4:len(got)-1], want[1:]) {
			t.Errorf("%q encodes to %v", "#### 1\n"+s+".", pieces(tok, got))
		}
	}
}

// TestWords checks that every word of the task is one piece, in both its
// forms: after a space, and at the start of a line.
func TestWords(t *testing.T) {
	tok := newTok(t)
	nl, ok := tok.Lookup("\n")
	if ok {
		t.Errorf(`"\n" is a piece (%d); the vocabulary was meant to use <0x0A>`, nl)
	}
	nl = 3 + '\n'
	dot, _ := tok.Lookup(".")
	question, _ := tok.Lookup("?")
	colon, _ := tok.Lookup(":")
	all := append(words(), operators...)
	for _, w := range all {
		spaced, ok1 := tok.Lookup(" " + w)
		bare, ok2 := tok.Lookup(w)
		if !ok1 || !ok2 {
			t.Errorf("word %q: piece ▁%s %v, piece %s %v", w, w, ok1, w, ok2)
			continue
		}
		// Encode puts a space before the text: "▁w".
		if got := tok.Encode(w, false); !slices.Equal(got, []int{spaced}) {
			t.Errorf("%q encodes to %v, want one piece", w, pieces(tok, got))
		}
		if s := "has " + w + ". " + w + "?"; !slices.Equal(tok.Encode(s, false)[1:], []int{spaced, dot, spaced, question}) {
			t.Errorf("%q encodes to %v", s, pieces(tok, tok.Encode(s, false)))
		}
		if s := "has.\n" + w + " " + w + ":"; !slices.Equal(tok.Encode(s, false)[1:], []int{dot, nl, bare, spaced, colon}) {
			t.Errorf("%q encodes to %v", s, pieces(tok, tok.Encode(s, false)))
		}
	}
	for _, p := range []string{".", "?", ":", "=", "+", "-", "*", "#", " =", " +", " -", " *"} {
		if _, ok := tok.Lookup(p); !ok {
			t.Errorf("%q is not a piece", p)
		}
	}
}

// pieces returns the vocabulary text of ids, for messages.
func pieces(tok *tokenizer.Tokenizer, ids []int) []string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = tok.Token(id)
	}
	return s
}

// textWords returns the words of s: its runs of letters and '#'.
func textWords(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && r != '#' })
}

// checkProblem encodes p and checks everything the package promises about
// it; it returns the prompt and completion lengths in tokens, BOS and EOS
// included.
func checkProblem(t *testing.T, tok *tokenizer.Tokenizer, p bench.GSM8KProblem, vocabWords map[string]bool) (promptLen, completionLen int) {
	t.Helper()
	ids, n, err := Encode(tok, p)
	if err != nil {
		t.Fatal(err)
	}
	prompt, completion := Prompt(p.Question), Completion(p.Answer)
	full := make([]int, len(ids))
	for i, id := range ids {
		full[i] = int(id)
	}
	// The split is the inference encoding of the prompt.
	if want := tok.Encode(prompt, tok.AddBOS()); !slices.Equal(full[:n], want) {
		t.Fatalf("prompt tokens %v, inference encodes %v", pieces(tok, full[:n]), pieces(tok, want))
	}
	if full[0] != tok.BOS() || full[len(full)-1] != tok.EOS() {
		t.Fatalf("sequence %v lacks BOS or EOS", pieces(tok, full))
	}
	// Round trips.
	if got := tok.Decode(full); got != prompt+completion {
		t.Fatalf("decode(encode) = %q, want %q", got, prompt+completion)
	}
	if got := tok.Decode(full[:n]); got != prompt {
		t.Fatalf("prompt decodes to %q, want %q", got, prompt)
	}
	// Token by token: words whole, digits alone, no byte but the newline.
	text := full[1 : len(full)-1]
	var gotWords []string
	for _, id := range text {
		piece := tok.Piece(id)
		switch {
		case tok.IsByte(id):
			if piece != "\n" {
				t.Errorf("byte token %s in %q", tok.Token(id), prompt+completion)
			}
			continue
		case tok.Type(id) != tokenizer.TypeNormal:
			t.Errorf("token %d %q of type %d in %q", id, tok.Token(id), tok.Type(id), prompt+completion)
			continue
		}
		w := strings.TrimPrefix(piece, " ")
		switch {
		case strings.ContainsAny(w, "0123456789"):
			if len(w) != 1 || w != piece {
				t.Errorf("number piece %q", piece)
			}
		case strings.IndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || r == '#' }) >= 0:
			gotWords = append(gotWords, w)
			if !vocabWords[w] {
				t.Errorf("piece %q is not a word of the task", piece)
			}
		}
	}
	if want := textWords(prompt + completion); !slices.Equal(gotWords, want) {
		t.Errorf("word tokens %q, want one token a word: %q", gotWords, want)
	}
	return n, len(full) - n
}

func wordSet() map[string]bool {
	m := make(map[string]bool)
	for _, w := range words() {
		m[w] = true
	}
	return m
}

func TestHandProblems(t *testing.T) {
	tok := newTok(t)
	for _, p := range handProblems {
		checkProblem(t, tok, p, wordSet())
	}
	// The whole sequence of the smallest, spelled out.
	p := bench.GSM8KProblem{Question: "Kim has 5 eggs. How many eggs does Kim have now?", Answer: "Kim has 5 = 5 eggs.\n#### 5"}
	ids, n, err := Encode(tok, p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, id := range ids {
		got = append(got, tok.Token(int(id)))
	}
	want := []string{"<s>", "▁Question", ":", "▁Kim", "▁has", "▁", "5", "▁eggs", ".", "▁How", "▁many", "▁eggs", "▁does", "▁Kim", "▁have", "▁now", "?", "<0x0A>", "Answer", ":",
		"▁Kim", "▁has", "▁", "5", "▁=", "▁", "5", "▁eggs", ".", "<0x0A>", "####", "▁", "5", "</s>"}
	if !slices.Equal(got, want) || n != 20 {
		t.Errorf("Encode = %q, prompt %d\nwant       %q, prompt 20", got, n, want)
	}
}

func TestEncodeErrors(t *testing.T) {
	if _, _, err := Encode(nil, handProblems[0]); err == nil {
		t.Error("nil tokenizer: no error")
	}
	v, err := Vocab()
	if err != nil {
		t.Fatal(err)
	}
	// A piece across the prompt's end (":" and the space after it) breaks the
	// boundary, which Encode must notice.
	v.Tokens = append(v.Tokens, ":▁")
	v.Scores = append(v.Scores, 100)
	v.Types = append(v.Types, tokenizer.TypeNormal)
	bad, err := tokenizer.New(*v)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Encode(bad, handProblems[0]); err == nil || !strings.Contains(err.Error(), "prompt") {
		t.Errorf("piece across the boundary: error %v", err)
	}
	v, _ = Vocab()
	v.EOS = -1
	noEOS, err := tokenizer.New(*v)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Encode(noEOS, handProblems[0]); err == nil {
		t.Error("no EOS: no error")
	}
}

// TestTestFile checks every problem of the arith test set, and that the
// word lists copied from the generator are exactly the words of the data.
func TestTestFile(t *testing.T) {
	path := modeltest.Path(t, testFile)
	ps, err := ReadFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	tok := newTok(t)
	vw := wordSet()
	seen := make(map[string]bool)
	var promptToks, complToks, maxLen int
	for _, p := range ps {
		np, nc := checkProblem(t, tok, p, vw)
		if t.Failed() {
			t.Fatalf("problem %q", p.Question)
		}
		promptToks += np
		complToks += nc
		maxLen = max(maxLen, np+nc)
		for _, w := range textWords(Prompt(p.Question) + Completion(p.Answer)) {
			seen[w] = true
		}
	}
	for w := range seen {
		if !vw[w] {
			t.Errorf("word %q of the data is not in the vocabulary's lists", w)
		}
	}
	for w := range vw {
		if !seen[w] {
			t.Errorf("word %q of the lists does not occur in %d problems", w, len(ps))
		}
	}
	n := float64(len(ps))
	t.Logf("%d problems, vocabulary %d: mean %.1f tokens a problem, prompt %.1f (with BOS), completion %.1f (with EOS); longest %d",
		len(ps), tok.VocabSize(), float64(promptToks+complToks)/n, float64(promptToks)/n, float64(complToks)/n, maxLen)
}

// TestTrainFile checks the first problems of the (gzip-compressed)
// training set.
func TestTrainFile(t *testing.T) {
	ps, err := ReadFile(modeltest.Path(t, trainFile), 2000)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2000 {
		t.Fatalf("read %d problems, want 2000", len(ps))
	}
	tok, vw := newTok(t), wordSet()
	for _, p := range ps {
		checkProblem(t, tok, p, vw)
		if t.Failed() {
			t.Fatalf("problem %q", p.Question)
		}
	}
}

// TestGGUFRoundTrip writes a model with the vocabulary to a GGUF file, loads
// it as the engine does, and checks that its tokenizer encodes as Tokenizer.
func TestGGUFRoundTrip(t *testing.T) {
	v, err := Vocab()
	if err != nil {
		t.Fatal(err)
	}
	shape := synth.Shape{Name: "arith-test", Dim: 16, HiddenDim: 32, Layers: 1, Heads: 2, KVHeads: 2,
		Vocab: len(v.Tokens), ContextLen: 256, RopeTheta: 10000, NormEps: 1e-5, Tied: true}
	path := filepath.Join(t.TempDir(), "arith.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(f, shape, kernels.F32, 1, v); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got, want := m.Tokenizer, newTok(t)
	if got.VocabSize() != want.VocabSize() || got.AddBOS() != want.AddBOS() || got.AddSpacePrefix() != want.AddSpacePrefix() ||
		got.BOS() != want.BOS() || got.EOS() != want.EOS() {
		t.Fatalf("loaded tokenizer: %d tokens, addBOS %v, space prefix %v, BOS %d, EOS %d", got.VocabSize(), got.AddBOS(), got.AddSpacePrefix(), got.BOS(), got.EOS())
	}
	for _, p := range handProblems {
		text := Prompt(p.Question) + Completion(p.Answer)
		if a, b := got.Encode(text, true), want.Encode(text, true); !slices.Equal(a, b) {
			t.Errorf("loaded tokenizer encodes %q to %v, Tokenizer to %v", text, a, b)
		}
		a, na, err1 := Encode(got, p)
		b, nb, err2 := Encode(want, p)
		if err1 != nil || err2 != nil || na != nb || !slices.Equal(a, b) {
			t.Errorf("Encode with the loaded tokenizer differs: %v %v", err1, err2)
		}
	}
}

func writeFile(t *testing.T, name, content string, gz bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if gz {
		zw := gzip.NewWriter(f)
		if _, err := zw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	} else if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

const twoProblems = `{"question": "Ann has 10 pens. How many pens does Ann have now?", "answer": "#### 10", "steps": 0}
{"question": "Ben has 12 eggs. He loses 2 eggs. How many eggs does Ben have now?", "answer": "Ben has 12 - 2 = 10 eggs.\n#### 10", "steps": 1}
`

func TestReadFile(t *testing.T) {
	for _, c := range []struct {
		name string
		gz   bool
	}{{"p.jsonl", false}, {"p.jsonl.gz", true}, {"gzip-without-the-name.jsonl", true}, {"p.txt", false}} {
		path := writeFile(t, c.name, twoProblems, c.gz)
		ps, err := ReadFile(path, 0)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(ps) != 2 || ps[1].Question != "Ben has 12 eggs. He loses 2 eggs. How many eggs does Ben have now?" || ps[1].Answer != "Ben has 12 - 2 = 10 eggs.\n#### 10" {
			t.Errorf("%s: read %+v", c.name, ps)
		}
		if ps, err := ReadFile(path, 1); err != nil || len(ps) != 1 {
			t.Errorf("%s: limit 1: %d problems, %v", c.name, len(ps), err)
		}
	}
}

func TestReadFileErrors(t *testing.T) {
	long := `{"question": "` + strings.Repeat("x", MaxLine) + `", "answer": "#### 1"}` + "\n"
	gzPath := writeFile(t, "cut.jsonl.gz", twoProblems+twoProblems, true)
	data, err := os.ReadFile(gzPath)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.jsonl.gz")
	if err := os.WriteFile(cut, data[:len(data)-12], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		want       []string // substrings of the error
	}{
		{"malformed", writeFile(t, "bad.jsonl", twoProblems+"{\"question\": \"x\",\n", false), []string{"bad.jsonl", "line 3"}},
		{"malformed gzip", writeFile(t, "bad.jsonl.gz", "\n"+twoProblems+"not json\n", true), []string{"bad.jsonl.gz", "line 4"}},
		{"no gold", writeFile(t, "nogold.jsonl", `{"question": "q", "answer": "a"}`+"\n", false), []string{"nogold.jsonl", "line 1", "####"}},
		{"long line", writeFile(t, "long.jsonl", twoProblems+long+twoProblems, false), []string{"long.jsonl", "line 3", "too long"}},
		{"long line gzip", writeFile(t, "long.jsonl.gz", long, true), []string{"long.jsonl.gz", "line 1", "too long"}},
		{"truncated gzip", cut, []string{"cut.jsonl.gz", "line"}},
		{"plain named .gz", writeFile(t, "plain.jsonl.gz", twoProblems, false), []string{"plain.jsonl.gz", "not gzip"}},
		{"empty", writeFile(t, "empty.jsonl", "", false), []string{"empty.jsonl", "no problems"}},
		{"missing", filepath.Join(t.TempDir(), "missing.jsonl"), []string{"missing.jsonl"}},
	} {
		ps, err := ReadFile(c.path, 0)
		if err == nil {
			t.Errorf("%s: no error, %d problems", c.name, len(ps))
			continue
		}
		t.Logf("%s: %v", c.name, err)
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
		if c.name == "missing" && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing: error %v is not fs.ErrNotExist", err)
		}
	}
	// The long line is past the limit: the problems before it are read.
	if ps, err := ReadFile(writeFile(t, "long.jsonl", twoProblems+long, false), 2); err != nil || len(ps) != 2 {
		t.Errorf("limit before a long line: %d problems, %v", len(ps), err)
	}
}

func BenchmarkEncode(b *testing.B) {
	tok := newTok(b)
	for b.Loop() {
		for _, p := range handProblems {
			if _, _, err := Encode(tok, p); err != nil {
				b.Fatal(err)
			}
		}
	}
}
