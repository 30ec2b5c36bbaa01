package arith

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// Prompt is the text the model is given for a question, which it must
// continue with Completion of the answer.
func Prompt(question string) string {
	return "Question: " + question + "\nAnswer:"
}

// Completion is the text the model must continue Prompt with (followed by
// the end-of-sequence token): the worked answer after a space.
func Completion(answer string) string {
	return " " + answer
}

// Encode returns the training sequence of a problem: the tokens of
// Prompt(p.Question) as inference encodes a prompt (tok.Encode with
// tok.AddBOS(), so BOS first for Vocab, and the dummy space prefix), then
// the tokens of Completion(p.Answer), then EOS. tokens[:promptLen] is the
// prompt's encoding alone, which is what the engine feeds the model.
//
// The sequence is the encoding of the prompt and completion as one text,
// and Encode checks that it is a clean continuation: that it starts with
// the prompt's encoding and that the remaining tokens decode, after the
// prompt, to exactly the completion. A tokenizer that merged across the
// boundary (say, a piece ":▁H") would fail the check.
func Encode(tok *tokenizer.Tokenizer, p bench.GSM8KProblem) (tokens []int32, promptLen int, err error) {
	if tok == nil {
		return nil, 0, errors.New("arith: nil tokenizer")
	}
	if tok.EOS() < 0 {
		return nil, 0, errors.New("arith: the tokenizer has no end-of-sequence token")
	}
	prompt, completion := Prompt(p.Question), Completion(p.Answer)
	pids := tok.Encode(prompt, tok.AddBOS())
	ids := tok.Encode(prompt+completion, tok.AddBOS())
	if len(pids) == 0 || len(ids) <= len(pids) || !slices.Equal(ids[:len(pids)], pids) {
		return nil, 0, fmt.Errorf("arith: question %.40q: the encoding of prompt and completion does not start with the prompt's", p.Question)
	}
	dec := tok.NewDecoder(pids[len(pids)-1])
	var got strings.Builder
	for _, id := range ids[len(pids):] {
		got.WriteString(dec.Next(id))
	}
	got.WriteString(dec.Flush())
	if got.String() != completion {
		return nil, 0, fmt.Errorf("arith: question %.40q: the completion's tokens decode to %q, not %q", p.Question, got.String(), completion)
	}
	tokens = make([]int32, 0, len(ids)+1)
	for _, id := range ids {
		tokens = append(tokens, int32(id))
	}
	tokens = append(tokens, int32(tok.EOS()))
	return tokens, len(pids), nil
}
