package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"strings"
	"text/template"

	"github.com/entropix-search/entropix-search/policy"
)

// GSM8KProblem is one line of the GSM8K JSONL format (openai/grade-school-
// math): a word problem and its worked solution, whose last line is
// "#### <number>".
//
// Steps, when the file has it (the arith task's files do), is the number
// of operations the solution takes; it groups the accuracy in reports.
type GSM8KProblem struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Steps    int    `json:"steps,omitempty"`
}

// Gold returns the problem's final answer: the number after the last
// "####", commas and dollar signs removed ("1,000" gives "1000").
func (p GSM8KProblem) Gold() (string, error) {
	i := strings.LastIndex(p.Answer, "####")
	if i < 0 {
		return "", errors.New("answer has no \"####\" line")
	}
	n, ok := policy.FirstNumber(p.Answer[i+4:])
	if !ok {
		return "", fmt.Errorf("no number after \"####\" in %q", strings.TrimSpace(p.Answer[i:]))
	}
	return n, nil
}

// maxGSM8KLine bounds one line of a GSM8K file (the longest real one is
// under 2 KiB).
const maxGSM8KLine = 1 << 20

// ReadGSM8K reads GSM8K problems, one JSON object a line, stopping after
// limit problems when limit > 0. Blank lines are skipped; a line that is
// not a problem with a question and a gold answer is an error naming the
// line.
func ReadGSM8K(r io.Reader, limit int) ([]GSM8KProblem, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxGSM8KLine)
	var ps []GSM8KProblem
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var p GSM8KProblem
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if strings.TrimSpace(p.Question) == "" {
			return nil, fmt.Errorf("line %d: no question", line)
		}
		if _, err := p.Gold(); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		ps = append(ps, p)
		if limit > 0 && len(ps) == limit {
			return ps, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ps, nil
}

// DefaultGSM8KTemplate is the zero-shot prompt of the published entropix
// comparison style: no examples, no chat template.
const DefaultGSM8KTemplate = "Question: {{.Question}}\nAnswer: Let's think step by step."

// GSM8K is the grade-school math task: each problem is rendered through a
// text/template (whose data has a Question field), and a completion is
// correct when policy.ExtractAnswer finds the gold number in it. NewArith makes
// the arith task of the same format, judged more strictly.
type GSM8K struct {
	name string
	path string
	tmpl *template.Template
	// check judges a completion against the gold number.
	check func(completion, gold string) bool
}

// NewGSM8K returns the task over the JSONL file at path, with the given
// prompt template (DefaultGSM8KTemplate when empty). The file is read by
// Items.
func NewGSM8K(path, tmpl string) (*GSM8K, error) {
	if tmpl == "" {
		tmpl = DefaultGSM8KTemplate
	}
	t, err := template.New("gsm8k").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, fmt.Errorf("gsm8k: prompt template: %w", err)
	}
	// Render once now, so that a template naming a missing field fails
	// here rather than on the first item.
	if err := t.Execute(io.Discard, gsm8kData{Question: "?"}); err != nil {
		return nil, fmt.Errorf("gsm8k: prompt template: %w", err)
	}
	return &GSM8K{name: "gsm8k", path: path, tmpl: t, check: gsm8kCorrect}, nil
}

// gsm8kCorrect is the GSM8K check: policy.ExtractAnswer finds the gold number.
func gsm8kCorrect(completion, gold string) bool {
	got, ok := policy.ExtractAnswer(completion)
	return ok && SameNumber(got, gold)
}

// gsm8kData is what the prompt template sees.
type gsm8kData struct {
	Question string
}

// Name returns "gsm8k" (or "arith" for NewArith's task).
func (g *GSM8K) Name() string { return g.name }

// Path returns the file the task reads.
func (g *GSM8K) Path() string { return g.path }

// Problems reads the first limit problems of the file (all when limit <=
// 0).
func (g *GSM8K) Problems(limit int) ([]GSM8KProblem, error) {
	f, err := os.Open(g.path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.name, err)
	}
	defer f.Close()
	ps, err := ReadGSM8K(f, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", g.name, g.path, err)
	}
	return ps, nil
}

// Items reads the first limit problems (all when limit <= 0). A problem
// with a step count is in the group "<n> steps".
func (g *GSM8K) Items(limit int) ([]Item, error) {
	ps, err := g.Problems(limit)
	if err != nil {
		return nil, err
	}
	items := make([]Item, len(ps))
	var b strings.Builder
	for i, p := range ps {
		b.Reset()
		if err := g.tmpl.Execute(&b, gsm8kData{Question: p.Question}); err != nil {
			return nil, fmt.Errorf("%s: problem %d: prompt template: %w", g.name, i+1, err)
		}
		gold, _ := p.Gold() // checked by ReadGSM8K
		check := g.check
		items[i] = Item{
			ID:     fmt.Sprintf("%s-%04d", g.name, i+1),
			Prompt: b.String(),
			Answer: gold,
			Check:  func(c string) bool { return check(c, gold) },
		}
		if p.Steps > 0 {
			items[i].Group = StepsGroup(p.Steps)
		}
	}
	return items, nil
}

// StepsGroup is the group label of a problem of n steps: "n steps".
func StepsGroup(n int) string {
	if n == 1 {
		return "1 step"
	}
	return fmt.Sprintf("%d steps", n)
}

// SameNumber reports whether two decimal numbers (as policy.LastNumber returns
// them, commas allowed) are equal as rationals: "18", "18.0" and "18.00"
// are the same; anything that does not parse equals nothing.
func SameNumber(a, b string) bool {
	x, ok1 := parseDecimal(a)
	y, ok2 := parseDecimal(b)
	return ok1 && ok2 && x.Cmp(y) == 0
}

// maxDecimalLen bounds the numbers SameNumber parses: big.Rat would accept
// exponents whose expansion takes unbounded memory.
const maxDecimalLen = 64

func parseDecimal(s string) (*big.Rat, bool) {
	s = strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(s), "$"), ",", "")
	if s == "" || len(s) > maxDecimalLen || strings.ContainsAny(s, "eE/xXpP_") {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}
