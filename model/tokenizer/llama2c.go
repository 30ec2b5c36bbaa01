package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// LoadLlama2C reads a llama2.c tokenizer.bin for a model with vocabSize
// tokens (the file does not store its own count; it comes from the model's
// header).
func LoadLlama2C(path string, vocabSize int) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return parseLlama2C(filepath.Base(path), data, vocabSize)
}

// ParseLlama2C reads a llama2.c tokenizer.bin image: int32 max_token_length,
// then for each token float32 score, int32 length and that many bytes, all
// little-endian. The file must hold exactly vocabSize tokens. Pieces are
// stored with plain spaces and byte pieces spelled <0xNN>; ids 0, 1 and 2
// are UNK, BOS and EOS, as llama2.c's run.c assumes.
func ParseLlama2C(data []byte, vocabSize int) (*Tokenizer, error) {
	return parseLlama2C("llama2.c tokenizer", data, vocabSize)
}

func parseLlama2C(name string, data []byte, vocabSize int) (*Tokenizer, error) {
	if vocabSize <= 0 {
		return nil, fmt.Errorf("tokenizer: %s: model vocabulary size %d is not positive", name, vocabSize)
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("tokenizer: %s: %d bytes is too short for the max_token_length header", name, len(data))
	}
	maxLen := int32(binary.LittleEndian.Uint32(data))
	if maxLen < 0 {
		return nil, fmt.Errorf("tokenizer: %s: max_token_length %d is negative", name, maxLen)
	}
	// Each token takes at least 8 bytes, which bounds the allocation.
	capacity := min(vocabSize, (len(data)-4)/8)
	tokens := make([]string, 0, capacity)
	scores := make([]float32, 0, capacity)
	for off := 4; off < len(data); {
		i := len(tokens)
		if len(data)-off < 8 {
			return nil, fmt.Errorf("tokenizer: %s: token %d at offset %d is truncated", name, i, off)
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		n := int32(binary.LittleEndian.Uint32(data[off+4:]))
		off += 8
		switch {
		case n < 0 || n > maxLen:
			return nil, fmt.Errorf("tokenizer: %s: token %d has length %d, outside [0, max_token_length %d]", name, i, n, maxLen)
		case int(n) > len(data)-off:
			return nil, fmt.Errorf("tokenizer: %s: token %d of %d bytes at offset %d runs past the end", name, i, n, off)
		case math.IsNaN(float64(score)):
			return nil, fmt.Errorf("tokenizer: %s: token %d has a NaN score", name, i)
		}
		tokens = append(tokens, string(data[off:off+int(n)]))
		scores = append(scores, score)
		off += int(n)
	}
	if len(tokens) != vocabSize {
		return nil, fmt.Errorf("tokenizer: %s holds %d tokens but the model has %d", name, len(tokens), vocabSize)
	}
	special := func(id int) int {
		if id < vocabSize {
			return id
		}
		return -1
	}
	t, err := New(Vocab{
		Model:          string(KindLlama),
		Tokens:         tokens,
		Scores:         scores,
		BOS:            special(1),
		EOS:            special(2),
		UNK:            special(0),
		PAD:            -1,
		AddBOS:         true,
		AddSpacePrefix: true,
	})
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, name)
	}
	return t, nil
}
