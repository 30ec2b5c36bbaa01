package tree

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/entropix-search/entropix-search/policy"
)

// trunk500 builds a 500-token greedy trunk, finished and committed, with
// forks at depths 100, 250 and 400 whose losing branches run 10 tokens and
// are pruned.
func trunk500(t testing.TB) *Tree {
	t.Helper()
	tr := New("The prompt", []int{1, 450})
	lelv := policy.Metrics{Entropy: 0.01, Varentropy: 0.002}
	lehv := policy.Metrics{Entropy: 1.2, Varentropy: 7.5}
	cur := Root
	for d := 1; d <= 500; d++ {
		n := Node{Token: 100 + d%50, Text: fmt.Sprintf(" w%d", d), LogProb: -0.01, Metrics: lelv, Quadrant: policy.LELV, Step: d}
		if d%150 == 100 {
			// A fork: the trunk takes one candidate, a sibling another
			// that runs 10 greedy tokens and loses.
			n.Action, n.Quadrant, n.Metrics = policy.Branch, policy.LEHV, lehv
			alt := tr.Add(cur, Node{Token: 7, Text: " alt", LogProb: -1.5, Metrics: lehv, Quadrant: policy.LEHV, Action: policy.Branch, Step: d})
			last := alt
			for i := range 10 {
				last = tr.Add(last, Node{Token: 8, Text: fmt.Sprintf(" a%d", i), LogProb: -0.02, Metrics: lelv, Quadrant: policy.LELV, Step: d + i + 1})
			}
			tr.PruneSubtree(alt, "lost-to-sibling", nil)
		}
		cur = tr.Add(cur, n)
	}
	tr.Finish(cur, "max-depth", nil)
	tr.Commit(cur)
	return tr
}

var nodeStmt = regexp.MustCompile(`(?m)^\tn\d+ \[`)

func writeDOT(t testing.TB, tr *Tree, opt DOTOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := tr.WriteDOT(&b, opt); err != nil {
		t.Fatal(err)
	}
	if err := checkDOT(b.String()); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return b.String()
}

// checkDOT is a small lexer for the subset of DOT that WriteDOT emits: valid
// UTF-8, every quoted string closed on its line with only \\, \" and \n
// escapes and no control characters, braces balanced outside quotes.
func checkDOT(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("DOT is not valid UTF-8")
	}
	depth, line := 0, 1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\n':
			line++
		case '{':
			depth++
		case '}':
			depth--
			if depth < 0 {
				return fmt.Errorf("line %d: unbalanced }", line)
			}
		case '"':
			for i++; ; i++ {
				if i >= len(s) || s[i] == '\n' {
					return fmt.Errorf("line %d: unterminated string", line)
				}
				if s[i] < 0x20 || s[i] == 0x7f {
					return fmt.Errorf("line %d: control byte %#x in string", line, s[i])
				}
				if s[i] == '"' {
					break
				}
				if s[i] == '\\' {
					i++
					if i >= len(s) || !strings.ContainsRune(`\"n`, rune(s[i])) {
						return fmt.Errorf("line %d: bad escape in string", line)
					}
				}
			}
		}
	}
	if depth != 0 {
		return fmt.Errorf("%d unclosed {", depth)
	}
	return nil
}

// runDot feeds src to dot -Tsvg and fails on an error or any warning.
func runDot(t *testing.T, src string) []byte {
	t.Helper()
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz dot not installed (apt-get install graphviz)")
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(dot, "-Tsvg")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(src), &out, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("dot -Tsvg: %v: %s", err, stderr.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("</svg>")) {
		t.Fatal("dot -Tsvg wrote no SVG")
	}
	return out.Bytes()
}

func TestDOTSample(t *testing.T) {
	tr, ids := sampleTree(t)
	tr.PruneSubtree(ids["day"], "below-sibling", nil)
	tr.Commit(ids["dot"])
	src := writeDOT(t, tr, DOTOptions{Title: `sample "tree"`})
	for _, want := range []string{
		`label="sample \"tree\""`,
		fmt.Sprintf(`n%d [label="“ day”\nH=1.50 V=6.25\n#%d branch\npruned: below-sibling", fillcolor="#a0c4ff80", style="rounded,filled,dashed"`, ids["day"], ids["day"]),
		fmt.Sprintf(`n%d [label="“.”\nH=0.05 V=0.02\n#%d sample\nΣlogp=-1.55 score=-1.50\nfinished: eos", fillcolor="#ffd6a5", peripheries=2, penwidth=3];`, ids["dot"], ids["dot"]),
		fmt.Sprintf(`n%d -> n%d [label="p=0.61", penwidth=3];`, ids["a"], ids["time"]),
		fmt.Sprintf(`n%d -> n%d [label="p=0.29", style=dashed, color="#9e9e9e"];`, ids["a"], ids["day"]),
		`subgraph cluster_legend {`,
		`n0 [label="prompt\n“Once”", fillcolor="#ffffff", penwidth=3];`,
	} {
		if !strings.Contains(src, want) {
			t.Errorf("DOT lacks %s\n%s", want, src)
		}
	}
	if got := len(nodeStmt.FindAllString(src, -1)); got != tr.Len() {
		t.Errorf("%d node statements, want %d (runs too short to collapse)", got, tr.Len())
	}
	if again := writeDOT(t, tr, DOTOptions{Title: `sample "tree"`}); again != src {
		t.Error("WriteDOT is not deterministic")
	}
	runDot(t, src)
	if src := writeDOT(t, tr, DOTOptions{NoLegend: true}); strings.Contains(src, "legend") {
		t.Error("NoLegend still wrote a legend")
	}
}

func TestDOTCollapses500Trunk(t *testing.T) {
	tr := trunk500(t)
	if tr.Len() != 1+500+3*11 {
		t.Fatalf("Len = %d", tr.Len())
	}
	src := writeDOT(t, tr, DOTOptions{})
	boxes := len(nodeStmt.FindAllString(src, -1))
	if boxes > 30 {
		t.Errorf("%d boxes for %d nodes: runs not collapsed", boxes, tr.Len())
	}
	for _, want := range []string{
		`×98 tokens, greedy`,                                         // depths 1..98 (99 forks)
		`“ w1 w2 w3 w4 w5… w95 w96 w97 w98”`,                         // clipped joined text
		`n0 -> n1 [penwidth=3];`,                                     // committed edge
		`shape=box3d, fillcolor="#b7e4c7", style=filled, penwidth=3`, // committed run
		`×9 tokens, greedy`,                                          // a losing branch
		`style="filled,dashed", color="#9e9e9e"`,                     // pruned run
		`finished: max-depth", fillcolor="#b7e4c7", peripheries=2, penwidth=3`,
	} {
		if !strings.Contains(src, want) {
			t.Errorf("DOT lacks %s", want)
		}
	}
	if full := writeDOT(t, tr, DOTOptions{CollapseRuns: -1}); len(nodeStmt.FindAllString(full, -1)) != tr.Len() {
		t.Error("CollapseRuns < 0 should draw every node")
	}
	runDot(t, src)
}

func TestDOTCollapseBoundaries(t *testing.T) {
	// A chain of exactly CollapseRuns greedy single-child nodes collapses,
	// one shorter does not; a status change splits a run.
	for _, tc := range []struct {
		chain, min, boxes int
	}{
		{4, 4, 1 + 1 + 1}, // root, run, leaf
		{3, 4, 1 + 3 + 1},
		{6, 3, 1 + 1 + 1},
	} {
		tr := New("p", nil)
		cur := Root
		for i := range tc.chain + 1 { // the last node is a leaf
			cur = tr.Add(cur, Node{Token: i, Text: "t"})
		}
		src := writeDOT(t, tr, DOTOptions{CollapseRuns: tc.min, NoLegend: true})
		if got := len(nodeStmt.FindAllString(src, -1)); got != tc.boxes {
			t.Errorf("chain %d, CollapseRuns %d: %d boxes, want %d\n%s", tc.chain, tc.min, got, tc.boxes, src)
		}
	}
	tr := New("p", nil)
	cur := Root
	for i := range 9 {
		cur = tr.Add(cur, Node{Token: i, Text: "t"})
		if i == 4 {
			tr.Commit(cur) // nodes 1..5 committed, 6..9 not
		}
	}
	src := writeDOT(t, tr, DOTOptions{NoLegend: true})
	// Edges leave a run from its head's box.
	for _, want := range []string{"×5 tokens", "#1..#5", "n1 -> n6", "n0 -> n1"} {
		if !strings.Contains(src, want) {
			t.Errorf("DOT lacks %q\n%s", want, src)
		}
	}
	if strings.Contains(src, "×3 tokens") || !strings.Contains(src, "n6 [") || !strings.Contains(src, "n9 [") {
		t.Errorf("the uncommitted tail of 3 chain nodes and a leaf should stay separate\n%s", src)
	}
}

func TestDisplay(t *testing.T) {
	for in, want := range map[string]string{
		"a b":          "a b",
		"x\ny\tz":      "x⏎y⇥z",
		"\x00\x7f":     "U+0000U+007F",
		"\xff\xe2\x82": `\xFF\xE2\x82`,
		"é\u2028":      "éU+2028",
		"\\N\"&lt;":    "\\N\"&lt;",
	} {
		if got := display(in); got != want {
			t.Errorf("display(%q) = %q, want %q", in, got, want)
		}
	}
	if got := escape(display("\\N\"&lt;\n")); got != `\\N\"&amp;lt;⏎` {
		t.Errorf("escape = %s", got)
	}
	if got := clip("abcdefghij", 5); got != "ab…ij" {
		t.Errorf("clip = %q", got)
	}
	if got := clip("ab", 1); got != "ab" && got != "…" {
		t.Errorf("clip = %q", got)
	}
	if got := clip("abcdef", -1); got != "abcdef" {
		t.Errorf("clip without limit = %q", got)
	}
}

// randomTextTree gives every node a random byte string as its text.
func randomTextTree(rng *rand.Rand, nodes int) *Tree {
	randText := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			switch rng.IntN(4) {
			case 0:
				b[i] = byte(rng.IntN(256))
			case 1:
				const special = `"\{}<>|&;[]=,` + "\n\r\t"
				b[i] = special[rng.IntN(len(special))]
			default:
				b[i] = byte(' ' + rng.IntN(95))
			}
		}
		return string(b)
	}
	tr := New(randText(), nil)
	for i := 1; i < nodes; i++ {
		n := Node{Token: i, Text: randText(), Reason: randText(), Action: policy.Action(rng.IntN(7)),
			Quadrant: policy.Quadrant(rng.IntN(5)), Status: Status(rng.IntN(3))}
		tr.Add(ID(rng.IntN(i)), n)
	}
	return tr
}

func TestDOTRandomTextGraphviz(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	tr := randomTextTree(rng, 300)
	tr.Commit(ID(tr.Len() - 1))
	src := writeDOT(t, tr, DOTOptions{Title: tr.Node(Root).Text, MaxLabel: -1, CollapseRuns: 2})
	runDot(t, src)
}

func TestWriteSVG(t *testing.T) {
	tr, _ := sampleTree(t)
	var b bytes.Buffer
	err := tr.WriteSVG(&b, DOTOptions{})
	if _, lookErr := exec.LookPath("dot"); lookErr != nil {
		if !errors.Is(err, ErrNoGraphviz) {
			t.Fatalf("WriteSVG without dot: %v, want ErrNoGraphviz", err)
		}
		t.Skip("Graphviz dot not installed")
	}
	if err != nil || !bytes.Contains(b.Bytes(), []byte("<svg")) {
		t.Fatalf("WriteSVG: %v", err)
	}
}

// FuzzDOTText checks that any token text, reason and title give DOT whose
// strings are closed and well escaped, and that the label shows the text.
func FuzzDOTText(f *testing.F) {
	for _, s := range []string{"", `"`, `\`, "\n", "\x00\xff\xfe", "a\"b\\c\nd", "<>{}|;", "&lt;&amp;", "\u2028\u00a0",
		`\N\G\L`, "\"\\\"", "日本語テキスト", "\x1b[31m"} {
		f.Add(s)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		b := make([]byte, 1+rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		tr := New(s, nil)
		id := tr.Add(Root, Node{Token: 1, Text: s, Status: Pruned, Reason: s})
		src := writeDOT(t, tr, DOTOptions{Title: s})
		// Undo the DOT escapes and entity of the label: the display text is
		// there.
		unescape := strings.NewReplacer(`\\`, `\`, `\"`, `"`, `&amp;`, `&`)
		want := "“" + clip(display(s), DefaultMaxLabel) + "”"
		if !strings.Contains(unescape.Replace(src), fmt.Sprintf("n%d [label=\"%s", id, want)) {
			t.Errorf("label of %q does not show %q\n%s", s, want, src)
		}
	})
}

// HidePruned and MaxDepth keep a big tree drawable: what they leave out
// is gone with everything below it, and no edge points to a missing node.
func TestDOTHideAndCut(t *testing.T) {
	tr := New("p", []int{1})
	a := tr.Add(Root, Node{Token: 2, Text: "a"})
	b := tr.Add(a, Node{Token: 3, Text: "b"})
	c := tr.Add(Root, Node{Token: 4, Text: "c"})
	d := tr.Add(c, Node{Token: 5, Text: "d"})
	tr.Finish(d, "eos", nil)
	tr.PruneSubtree(c, "lost", nil)
	tr.Commit(b)
	count := func(opt DOTOptions) (nodes, edges int, dot string) {
		var buf bytes.Buffer
		opt.NoLegend = true
		opt.CollapseRuns = 1
		if err := tr.WriteDOT(&buf, opt); err != nil {
			t.Fatal(err)
		}
		s := buf.String()
		return strings.Count(s, "\tn") - strings.Count(s, "->") - strings.Count(s, "\tnode ["), strings.Count(s, "->"), s
	}
	if n, e, s := count(DOTOptions{}); n != 5 || e != 4 {
		t.Errorf("all: %d nodes, %d edges\n%s", n, e, s)
	}
	if n, e, s := count(DOTOptions{HidePruned: true}); n != 3 || e != 2 || strings.Contains(s, `"d"`) {
		t.Errorf("hide pruned: %d nodes, %d edges\n%s", n, e, s)
	}
	if n, e, s := count(DOTOptions{MaxDepth: 1}); n != 3 || e != 2 {
		t.Errorf("depth 1: %d nodes, %d edges\n%s", n, e, s)
	}
}
