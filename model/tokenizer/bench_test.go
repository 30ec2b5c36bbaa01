package tokenizer

import (
	"strings"
	"testing"
)

// benchText returns about n bytes of story-like text with some punctuation,
// digits, newlines and non-ASCII characters.
func benchText(n int) string {
	const para = "Once upon a time, there was a little girl named Lily. She loved to play outside " +
		"in the sunshine with her dog, Max. One day in 2023 they found 17 shiny stones near the " +
		"river — «très jolies», said Lily. \"Can we keep them?\" she asked her mom. 😀\n\n"
	return strings.Repeat(para, n/len(para)+1)[:n]
}

func benchEncode(b *testing.B, tok *Tokenizer, text string) {
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	var dst []int
	for b.Loop() {
		dst = tok.AppendEncode(dst[:0], text, true)
	}
}

// BenchmarkEncode4KB encodes a 4 KB prompt.
func BenchmarkEncode4KB(b *testing.B) {
	text := benchText(4096)
	b.Run("llama2-32000", func(b *testing.B) { benchEncode(b, llamaTok(b, "llama2-32000"), text) })
	b.Run("tok512", func(b *testing.B) { benchEncode(b, llamaTok(b, "tok512"), text) })
	b.Run("gpt2-hand", func(b *testing.B) { benchEncode(b, handTokenizer(b), text) })
}

// BenchmarkEncodeLong encodes a single 10k-character word-free run and a
// 64 KB text, where a quadratic merge loop would show.
func BenchmarkEncodeLong(b *testing.B) {
	tok := llamaTok(b, "llama2-32000")
	b.Run("10k-letters", func(b *testing.B) { benchEncode(b, tok, strings.Repeat("ab", 5000)) })
	b.Run("10k-spaces", func(b *testing.B) { benchEncode(b, tok, strings.Repeat(" ", 10000)) })
	b.Run("64KB", func(b *testing.B) { benchEncode(b, tok, benchText(64<<10)) })
	b.Run("gpt2-10k-letters", func(b *testing.B) { benchEncode(b, handTokenizer(b), strings.Repeat("ab", 5000)) })
}

func BenchmarkDecoderNext(b *testing.B) {
	tok := llamaTok(b, "llama2-32000")
	ids := tok.Encode(benchText(4096), true)
	b.ReportAllocs()
	for b.Loop() {
		d := tok.NewDecoder(-1)
		for _, id := range ids {
			d.Next(id)
		}
	}
}
