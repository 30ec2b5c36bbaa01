package synth

import (
	"fmt"

	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// minVocab is the smallest synthetic vocabulary: <unk>, <s>, </s> and the
// 256 byte pieces that let every text be encoded.
const minVocab = 3 + 256

// SyntheticVocab returns a vocabulary of n >= 259 pieces laid out as Llama
// 2's: <unk>, <s>, </s>, the byte pieces <0x00>..<0xFF>, then printable
// ASCII characters, "▁", and made-up letter pieces, every piece distinct,
// with scores falling by one per piece as SentencePiece's do.
func SyntheticVocab(n int) (*tokenizer.Vocab, error) {
	if n < minVocab {
		return nil, fmt.Errorf("synth: synthetic vocabulary of %d tokens: need at least %d", n, minVocab)
	}
	v := tokenizer.NewLlamaVocab()
	score := float32(0)
	normal := func(s string) {
		score--
		v.Add(s, tokenizer.TypeNormal, score)
	}
	if len(v.Tokens) < n {
		normal("▁")
	}
	for c := byte('!'); c <= '~' && len(v.Tokens) < n; c++ {
		normal(string(c))
	}
	// Made-up words: base-26 numerals in letters, alternately starting a
	// word ("▁") and continuing one, never colliding with the pieces above
	// (they are at least two characters or carry the "▁").
	for i := 0; len(v.Tokens) < n; i++ {
		w := letters(i/2 + 26)
		if i%2 == 0 {
			w = "▁" + w
		}
		normal(w)
	}
	return v, nil
}

// letters spells i in base 26 with the digits a..z.
func letters(i int) string {
	var b [16]byte
	p := len(b)
	for {
		p--
		b[p] = byte('a' + i%26)
		i /= 26
		if i == 0 {
			break
		}
	}
	return string(b[p:])
}

// ReadLlama2CVocab reads a llama2.c tokenizer.bin of n pieces (the Llama 2
// vocabulary, say) in the GGUF form WriteGGUF stores.
func ReadLlama2CVocab(path string, n int) (*tokenizer.Vocab, error) {
	tok, err := tokenizer.LoadLlama2C(path, n)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	v := tok.GGUFVocab()
	return &v, nil
}
