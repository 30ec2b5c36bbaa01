package arith

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// The words of the task, copied by hand from the generator's lists (gen.py:
// NAMES, ITEMS and the phrasings of problem) and from Prompt.
var (
	names = []string{"Ann", "Ben", "Cal", "Dan", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lee",
		"Max", "Ned", "Oli", "Pam", "Quin", "Ray", "Sue", "Tom", "Uma", "Val", "Wes", "Zoe"}
	items = []string{"apples", "pens", "cards", "coins", "books", "eggs", "rocks", "stamps",
		"shells", "marbles", "stickers", "cookies", "beads", "toys", "pears", "plums"}
	otherWords = []string{
		"Question", "Answer", // the prompt
		"She", "He", "has", "finds", "buys", "more", "gets", "from", "gives", "to", "loses", "sells",
		"bags", "bag", "with", "in", "each", "Then", "doubles", "the", "How", "many", "does", "have",
		"now", "The", "hold", "####",
	}
	// operators are the symbols written between spaces in the worked
	// solutions; each also gets a piece with the space before it.
	operators = []string{"=", "+", "-", "*"}
)

// words returns every word of the task, each once.
func words() []string {
	var ws []string
	for _, list := range [][]string{names, items, otherWords} {
		for _, w := range list {
			if !slices.Contains(ws, w) {
				ws = append(ws, w)
			}
		}
	}
	return ws
}

// space is how a SentencePiece vocabulary writes a space.
const space = "▁"

// Special ids of the vocabulary, as in Llama 2.
const (
	unkID = 0
	bosID = 1
	eosID = 2
)

// Vocab returns the task's SentencePiece ("llama") vocabulary: <unk>, <s>,
// </s>, the byte pieces <0x00>..<0xFF>, then the normal pieces, highest
// score first (see the package documentation). It is the same on every
// call, and a new copy each time. BOS and EOS are added around a sequence
// as Llama 2 does (AddBOS, and the dummy space prefix AddSpacePrefix, are
// set), so a GGUF file written with it (by model/synth's writers, say)
// loads back the same tokenizer (see TestGGUFRoundTrip).
func Vocab() (*tokenizer.Vocab, error) {
	v := tokenizer.NewLlamaVocab()
	if v.UNK != unkID || v.BOS != bosID || v.EOS != eosID {
		return nil, fmt.Errorf("arith: special ids %d, %d, %d", v.UNK, v.BOS, v.EOS)
	}
	pieces := map[string]bool{space: true}
	for c := byte('!'); c <= '~'; c++ {
		pieces[string(c)] = true
	}
	for _, w := range words() {
		for _, form := range []string{w, space + w} {
			// Every prefix of the form, down to its first two characters,
			// so that merging it letter by letter always finds a piece.
			for i := range form {
				if i > 0 {
					pieces[form[:i]] = true
				}
			}
			pieces[form] = true
		}
	}
	for _, op := range operators {
		pieces[space+op] = true
	}

	normal := make([]string, 0, len(pieces))
	for p := range pieces {
		if strings.ContainsAny(p, "0123456789") && utf8.RuneCountInString(p) > 1 {
			return nil, fmt.Errorf("arith: piece %q would merge a digit", p)
		}
		normal = append(normal, p)
	}
	score := func(p string) float32 { return float32(utf8.RuneCountInString(p)) }
	slices.SortFunc(normal, func(a, b string) int {
		if sa, sb := score(a), score(b); sa != sb {
			if sa > sb {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, p := range normal {
		v.Add(p, tokenizer.TypeNormal, score(p))
	}
	return v, nil
}

// Tokenizer returns the tokenizer of Vocab, built as the GGUF loader
// builds the one embedded in a model file (tokenizer.New).
func Tokenizer() (*tokenizer.Tokenizer, error) {
	v, err := Vocab()
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.New(*v)
	if err != nil {
		return nil, fmt.Errorf("arith: %w", err)
	}
	return tok, nil
}
