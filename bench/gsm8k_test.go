package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/policy"
)

func TestSameNumber(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"18", "18", true},
		{"18", "18.00", true},
		{"1,000", "1000", true},
		{"$5", "5", true},
		{"-3", "3", false},
		{"0.1", "0.10", true},
		{"007", "7", true},
		{"18", "", false},
		{"abc", "abc", false},
		{"1e3", "1000", false},
		{"1/2", "0.5", false},
		{strings.Repeat("9", 100), strings.Repeat("9", 100), false},
	} {
		if got := SameNumber(c.a, c.b); got != c.want {
			t.Errorf("SameNumber(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestReadGSM8K(t *testing.T) {
	good := `{"question": "What is 2+2?", "answer": "2+2=<<2+2=4>>4\n#### 4"}

{"question": "Costs?", "answer": "It costs\n#### 1,500"}
`
	ps, err := ReadGSM8K(strings.NewReader(good), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Question != "What is 2+2?" {
		t.Fatalf("got %+v", ps)
	}
	if g, err := ps[1].Gold(); g != "1500" || err != nil {
		t.Errorf("Gold() = %q, %v; want 1500", g, err)
	}
	if ps, err := ReadGSM8K(strings.NewReader(good), 1); err != nil || len(ps) != 1 {
		t.Errorf("limit 1: %d problems, %v", len(ps), err)
	}
	for _, c := range []struct{ name, in, want string }{
		{"not JSON", "{\"question\": \"q\", \"answer\": \"#### 1\"}\nnot json\n", "line 2"},
		{"no question", `{"answer": "#### 1"}`, "no question"},
		{"no gold line", `{"question": "q", "answer": "it is 1"}`, "####"},
		{"no gold number", `{"question": "q", "answer": "#### many"}`, "no number"},
		{"line too long", `{"question": "` + strings.Repeat("x", maxGSM8KLine) + `"}`, "too long"},
	} {
		if _, err := ReadGSM8K(strings.NewReader(c.in), 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

func TestNewGSM8K(t *testing.T) {
	if _, err := NewGSM8K("x.jsonl", "{{.Question"); err == nil {
		t.Error("a broken template parsed")
	}
	if _, err := NewGSM8K("x.jsonl", "{{.Missing}}"); err == nil {
		t.Error("a template naming a missing field was accepted")
	}
	g, err := NewGSM8K("/nonexistent/test.jsonl", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Items(1); err == nil || !strings.Contains(err.Error(), "gsm8k") {
		t.Errorf("absent file: error %v", err)
	}
}

// TestGSM8KShared reads the real file: every one of the first problems
// is checked correct on its own worked solution, and not on a wrong one.
func TestGSM8KShared(t *testing.T) {
	path := modeltest.Path(t, modeltest.GSM8K)
	g, err := NewGSM8K(path, "Q: {{.Question}}\nA:")
	if err != nil {
		t.Fatal(err)
	}
	items, err := g.Items(200)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 200 || items[0].Answer != "18" || items[0].ID != "gsm8k-0001" {
		t.Fatalf("%d items, first %+v", len(items), items[0])
	}
	if !strings.HasPrefix(items[0].Prompt, "Q: Janet") || !strings.HasSuffix(items[0].Prompt, "\nA:") {
		t.Errorf("prompt %q", items[0].Prompt)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := ReadGSM8K(f, 200)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		if !it.Check(ps[i].Answer) {
			t.Errorf("%s: its own solution %q is not checked correct (gold %s)", it.ID, ps[i].Answer, it.Answer)
		}
		if it.Check(fmt.Sprintf("The answer is %s1.", it.Answer)) {
			t.Errorf("%s: a wrong answer is checked correct", it.ID)
		}
	}
	all, err := g.Items(0)
	if err != nil || len(all) != 1319 {
		t.Errorf("all items: %d, %v; want 1319", len(all), err)
	}
}

func FuzzExtractAnswer(f *testing.F) {
	for _, s := range []string{"", "18", "-$1,234.50", "#### 7", "answer is 3.", "1,2345", "−", "-$", "9,999,999,999.999999", "\xff5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := policy.ExtractAnswer(s)
		if !ok {
			return
		}
		if n == "" || strings.ContainsAny(n, ",$ ") {
			t.Fatalf("ExtractAnswer(%q) = %q: not normalised", s, n)
		}
		if len(n) <= maxDecimalLen && !SameNumber(n, n) {
			t.Fatalf("ExtractAnswer(%q) = %q, which does not parse", s, n)
		}
		last, _ := policy.LastNumber(s)
		if !strings.Contains(s, "Question:") && !strings.Contains(strings.ToLower(s), "answer is") && !strings.Contains(s, "####") && last != n {
			t.Fatalf("ExtractAnswer(%q) = %q, LastNumber = %q", s, n, last)
		}
	})
}

func ExampleSameNumber() {
	n, _ := policy.ExtractAnswer("She sells 16 - 3 - 4 = 9 eggs at $2 each, making $18.\n\nQuestion: next one")
	fmt.Println(n, SameNumber(n, "18.00"))
	// Output: 18 true
}
