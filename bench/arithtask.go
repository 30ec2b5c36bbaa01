package bench

import (
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/entropix-search/entropix-search/model"
)

// ArithTemplate is the prompt of the arith task, the format its models are
// trained on: they continue with " <worked answer>\n#### N" and the end of
// text.
const ArithTemplate = "Question: {{.Question}}\nAnswer:"

// NewArith returns the arith task over the JSONL file at path: multi-step
// arithmetic word problems in the GSM8K format, with a "steps" field
// (../shared/data/arith). Prompts are ArithTemplate; items are grouped by
// step count ("3 steps"); a completion is correct when ArithCorrect says
// so. The file is read by Items.
func NewArith(path string) *GSM8K {
	t := template.Must(template.New("arith").Option("missingkey=error").Parse(ArithTemplate))
	return &GSM8K{name: "arith", path: path, tmpl: t, check: ArithCorrect}
}

// ArithCorrect reports whether a completion of the arith task states the
// gold answer: the text is cut at "Question:" (a model that goes on to
// invent the next problem), and the first number after its last "####"
// must equal gold (SameNumber). A completion without "####" is wrong even
// when its last number is the gold: a solution cut short by the token
// limit has not answered.
func ArithCorrect(completion, gold string) bool {
	if i := strings.Index(completion, "Question:"); i >= 0 {
		completion = completion[:i]
	}
	got, err := GSM8KProblem{Answer: completion}.Gold()
	return err == nil && SameNumber(got, gold)
}

// AnswerTokenLimit is a token limit that fits every worked answer of the
// task's file (read in full, whatever the evaluation's limit, so that the
// limit does not depend on how many problems run): the longest answer in
// m's tokens, with its leading space, plus a quarter and one token for the
// end of text, rounded up to a multiple of 16.
func (g *GSM8K) AnswerTokenLimit(m *model.Model) (int, error) {
	if m.Tokenizer == nil {
		return 0, errors.New("bench: the model has no tokenizer")
	}
	ps, err := g.Problems(0)
	if err != nil {
		return 0, err
	}
	if len(ps) == 0 {
		return 0, fmt.Errorf("%s: %s has no problems", g.name, g.path)
	}
	longest := 0
	for _, p := range ps {
		longest = max(longest, len(m.Tokenizer.Encode(" "+p.Answer, false)))
	}
	n := longest + longest/4 + 1
	return (n + 15) / 16 * 16, nil
}
