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
	"unicode/utf8"
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
	n, ok := firstNumber(p.Answer[i+4:])
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
// correct when ExtractAnswer finds the gold number in it. NewArith makes
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

// gsm8kCorrect is the GSM8K check: ExtractAnswer finds the gold number.
func gsm8kCorrect(completion, gold string) bool {
	got, ok := ExtractAnswer(completion)
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

// ExtractAnswer finds the final answer of a math completion. The text is
// first cut at "Question:" (a model that goes on to invent the next
// problem); then the answer is the first number after the last "####" or
// "answer is", when the completion has one, and otherwise the last number
// of the text. Numbers are returned as LastNumber returns them.
func ExtractAnswer(completion string) (string, bool) {
	s := completion
	if i := strings.Index(s, "Question:"); i >= 0 {
		s = s[:i]
	}
	if n, ok := MarkedAnswer(s); ok {
		return n, true
	}
	return LastNumber(s)
}

// MarkedAnswer is ExtractAnswer without its fallback: the first number
// after the last "####" or "answer is", and false when the completion has
// neither. A text that does not mark its answer has none to vote with.
func MarkedAnswer(completion string) (string, bool) {
	s := completion
	if i := strings.Index(s, "Question:"); i >= 0 {
		s = s[:i]
	}
	lower := strings.ToLower(s)
	for _, marker := range []string{"####", "answer is"} {
		if i := strings.LastIndex(lower, marker); i >= 0 {
			if n, ok := firstNumber(lower[i+len(marker):]); ok {
				return n, true
			}
		}
	}
	return "", false
}

// LastNumber returns the last number in s, normalised: thousands commas
// and a dollar sign removed, a minus sign kept ("-$1,250.50" gives
// "-1250.50"). A comma belongs to a number only when exactly three digits
// follow it ("1, 2" is two numbers); a minus sign only when it does not
// follow a letter or digit ("3-4" is 3 and 4, "x = -4" is -4).
func LastNumber(s string) (string, bool) {
	last, ok := "", false
	scanNumbers(s, func(n string) bool {
		last, ok = n, true
		return true
	})
	return last, ok
}

// firstNumber returns the first number in s, as LastNumber would.
func firstNumber(s string) (string, bool) {
	first, ok := "", false
	scanNumbers(s, func(n string) bool {
		first, ok = n, true
		return false
	})
	return first, ok
}

// scanNumbers calls yield with each number of s in order, until yield
// returns false.
func scanNumbers(s string, yield func(string) bool) {
	isDigit := func(i int) bool { return i >= 0 && i < len(s) && s[i] >= '0' && s[i] <= '9' }
	var b []byte
	for i := 0; i < len(s); {
		if !isDigit(i) {
			i++
			continue
		}
		b = b[:0]
		if negativeBefore(s, i) {
			b = append(b, '-')
		}
		// Integer part, with thousands commas.
		for {
			for isDigit(i) {
				b = append(b, s[i])
				i++
			}
			if i < len(s) && s[i] == ',' && isDigit(i+1) && isDigit(i+2) && isDigit(i+3) && !isDigit(i+4) {
				i++
				continue
			}
			break
		}
		// Fraction.
		if i < len(s) && s[i] == '.' && isDigit(i+1) {
			b = append(b, '.')
			for i++; isDigit(i); i++ {
				b = append(b, s[i])
			}
		}
		if !yield(string(b)) {
			return
		}
	}
}

// negativeBefore reports whether the number starting at s[i] has a minus
// sign: '-' or '−' (U+2212) just before it, or before a '$' just before
// it, not itself preceded by a letter or digit.
func negativeBefore(s string, i int) bool {
	j := i
	if j > 0 && s[j-1] == '$' {
		j--
	}
	r, size := utf8.DecodeLastRuneInString(s[:j])
	if r != '-' && r != '−' {
		return false
	}
	prev, _ := utf8.DecodeLastRuneInString(s[:j-size])
	return j-size == 0 || !isWordRune(prev)
}

// SameNumber reports whether two decimal numbers (as LastNumber returns
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
