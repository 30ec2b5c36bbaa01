package synth

import (
	"fmt"
	"io"

	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// ggml's general.file_type values for the weight types (Q4_K: the Q4_K_M
// mix, see Generate).
const (
	fileTypeAllF32     = 0
	fileTypeMostlyF16  = 1
	fileTypeMostlyQ40  = 2
	fileTypeMostlyQ80  = 7
	fileTypeMostlyQ4KM = 15
	fileTypeMostlyQ5KS = 16
	fileTypeMostlyQ6K  = 18
	fileTypeMostlyBF16 = 32
)

// WriteGGUF writes the model Generate(shape, dtype, seed) builds as a GGUF
// v3 file of architecture "llama": the llama.* shape keys, general.*
// keys, the tokenizer.ggml.* keys of vocab (nil means
// SyntheticVocab(shape.Vocab)), and the tensors under llama.cpp's names.
// A tied model has no output.weight, which llama.cpp and model.Load both
// read as sharing token_embd.weight.
func WriteGGUF(w io.Writer, shape Shape, dtype kernels.DType, seed uint64, vocab *tokenizer.Vocab) error {
	if err := shape.Validate(); err != nil {
		return err
	}
	if vocab == nil {
		var err error
		if vocab, err = SyntheticVocab(shape.Vocab); err != nil {
			return err
		}
	}
	if err := checkVocab(shape, vocab); err != nil {
		return err
	}
	ts, err := build(shape, dtype, seed, true)
	if err != nil {
		return err
	}
	fileType := uint32(fileTypeAllF32)
	switch dtype {
	case kernels.Q8_0:
		fileType = fileTypeMostlyQ80
	case kernels.Q4_K:
		fileType = fileTypeMostlyQ4KM
	case kernels.Q5_K:
		fileType = fileTypeMostlyQ5KS
	case kernels.Q6_K:
		fileType = fileTypeMostlyQ6K
	case kernels.Q4_0:
		fileType = fileTypeMostlyQ40
	case kernels.F16:
		fileType = fileTypeMostlyF16
	case kernels.BF16:
		fileType = fileTypeMostlyBF16
	}
	wts := make([]gguf.WriteTensor, len(ts))
	for i, t := range ts {
		wts[i] = writeTensor(t.name, t.rows, t.cols, t.vec, t.typ, t.raw)
	}
	return writeGGUF(w, shape, fmt.Sprintf("synth-%s-%v-seed%d", shape.Name, dtype, seed), fileType, vocab, wts)
}

// WriteTensorsGGUF writes a model of the given shape whose float32 weights
// are ts (named and ordered as Init gives them, e.g. trained ones) as a GGUF
// v3 file of architecture "llama" named name, with the tokenizer vocab.
func WriteTensorsGGUF(w io.Writer, shape Shape, name string, vocab *tokenizer.Vocab, ts []Tensor) error {
	if err := shape.Validate(); err != nil {
		return err
	}
	if err := checkVocab(shape, vocab); err != nil {
		return err
	}
	wts := make([]gguf.WriteTensor, len(ts))
	for i, t := range ts {
		if len(t.Values) != t.Rows*t.Cols {
			return fmt.Errorf("synth: tensor %s has %d values for %dx%d", t.Name, len(t.Values), t.Rows, t.Cols)
		}
		wts[i] = writeTensor(t.Name, t.Rows, t.Cols, t.Vec, gguf.F32, f32Bytes(t.Values))
	}
	return writeGGUF(w, shape, name, fileTypeAllF32, vocab, wts)
}

// writeTensor describes one tensor for gguf.Write.
func writeTensor(name string, rows, cols int, vec bool, typ gguf.Type, raw []byte) gguf.WriteTensor {
	wt := gguf.WriteTensor{Name: name, Type: typ, Data: raw, Dims: []uint64{uint64(cols), uint64(rows)}}
	if vec {
		wt.Dims = []uint64{uint64(cols)}
	}
	return wt
}

// checkVocab checks that vocab fits a model of shape s.
func checkVocab(s Shape, vocab *tokenizer.Vocab) error {
	n := len(vocab.Tokens)
	switch {
	case n != s.Vocab:
		return fmt.Errorf("synth: vocabulary of %d tokens for shape %q of %d", n, s.Name, s.Vocab)
	case len(vocab.Scores) != n || len(vocab.Types) != n:
		return fmt.Errorf("synth: vocabulary of %d tokens has %d scores and %d types", n, len(vocab.Scores), len(vocab.Types))
	case vocab.BOS < 0 || vocab.BOS >= n || vocab.EOS < 0 || vocab.EOS >= n || vocab.UNK < 0 || vocab.UNK >= n:
		return fmt.Errorf("synth: special ids BOS %d, EOS %d, UNK %d outside a vocabulary of %d", vocab.BOS, vocab.EOS, vocab.UNK, n)
	}
	return nil
}

// writeGGUF writes the llama.* shape keys, general.* keys, the
// tokenizer.ggml.* keys of vocab and the tensors wts.
func writeGGUF(w io.Writer, shape Shape, name string, fileType uint32, vocab *tokenizer.Vocab, wts []gguf.WriteTensor) error {
	u32 := func(x int) gguf.Value { return gguf.Uint32(uint32(x)) }
	kv := []gguf.KV{
		{Key: "general.architecture", Value: gguf.String("llama")},
		{Key: "general.name", Value: gguf.String(name)},
		{Key: "general.file_type", Value: gguf.Uint32(fileType)},
		{Key: "llama.vocab_size", Value: u32(shape.Vocab)},
		{Key: "llama.context_length", Value: u32(shape.ContextLen)},
		{Key: "llama.embedding_length", Value: u32(shape.Dim)},
		{Key: "llama.block_count", Value: u32(shape.Layers)},
		{Key: "llama.feed_forward_length", Value: u32(shape.HiddenDim)},
		{Key: "llama.rope.dimension_count", Value: u32(shape.HeadDim())},
		{Key: "llama.rope.freq_base", Value: gguf.Float32(float32(shape.RopeTheta))},
		{Key: "llama.attention.head_count", Value: u32(shape.Heads)},
		{Key: "llama.attention.head_count_kv", Value: u32(shape.KVHeads)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: gguf.Float32(shape.NormEps)},
		{Key: "tokenizer.ggml.model", Value: gguf.String("llama")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strings(vocab.Tokens)},
		{Key: "tokenizer.ggml.scores", Value: gguf.Float32s(vocab.Scores)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Int32s(vocab.Types)},
		{Key: "tokenizer.ggml.bos_token_id", Value: u32(vocab.BOS)},
		{Key: "tokenizer.ggml.eos_token_id", Value: u32(vocab.EOS)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: u32(vocab.UNK)},
		{Key: "tokenizer.ggml.add_bos_token", Value: gguf.Bool(vocab.AddBOS)},
		{Key: "tokenizer.ggml.add_eos_token", Value: gguf.Bool(false)},
	}
	if err := gguf.Write(w, kv, wts); err != nil {
		return fmt.Errorf("synth: shape %q: %w", shape.Name, err)
	}
	return nil
}
