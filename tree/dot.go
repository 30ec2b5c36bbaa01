package tree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/entropix-search/entropix-search/policy"
)

// Defaults of DOTOptions.
const (
	DefaultCollapseRuns = 4
	DefaultMaxLabel     = 32
)

// DOTOptions control WriteDOT and WriteSVG.
type DOTOptions struct {
	// CollapseRuns is the shortest chain of nodes drawn as one box: a chain
	// of consecutive routine steps (greedy, sampled, multi-sampled or
	// resampled tokens in the LELV or adaptive quadrant), each with exactly
	// one child and the same status and committed mark. Forks, clarify
	// insertions, backspaces, uncertain quadrants and leaves are never
	// collapsed. 0 means DefaultCollapseRuns; below 2, nothing collapses.
	CollapseRuns int
	// MaxLabel is the most characters of text shown in a box; a longer text
	// keeps its start and its end around "…". 0 means DefaultMaxLabel;
	// negative means no limit.
	MaxLabel int
	// Title is drawn above the graph.
	Title string
	// NoLegend leaves out the legend.
	NoLegend bool
	// HidePruned leaves out the pruned (and unexplored) subtrees that are
	// not on the committed path, so that a big tree shows what was chosen
	// and what was finished.
	HidePruned bool
	// MaxDepth, when above 0, draws only the nodes at most that many tokens
	// below the prompt.
	MaxDepth int
}

// Fill colours by quadrant.
var quadrantColors = [policy.NumQuadrants]string{
	policy.Adaptive: "#d9d9d9", // grey
	policy.LELV:     "#b7e4c7", // green
	policy.HELV:     "#ffd6a5", // orange
	policy.LEHV:     "#a0c4ff", // blue
	policy.HEHV:     "#ffadad", // red
}

func quadrantColor(q policy.Quadrant) string {
	if int(q) < len(quadrantColors) {
		return quadrantColors[q]
	}
	return "#ffffff"
}

const (
	prunedColor = "#9e9e9e"
	prunedFont  = "#616161"
	boldWidth   = "3"
)

// WriteDOT writes the tree as a Graphviz digraph: one box per node (or per
// collapsed run of routine steps) labelled with its text, entropy,
// varentropy and action, filled by quadrant; pruned nodes dashed and grey,
// finished leaves with a double border, the committed path bold; and a
// legend. The same tree and options give the same bytes.
func (t *Tree) WriteDOT(w io.Writer, opt DOTOptions) error {
	if opt.CollapseRuns == 0 {
		opt.CollapseRuns = DefaultCollapseRuns
	}
	if opt.MaxLabel == 0 {
		opt.MaxLabel = DefaultMaxLabel
	}
	var b bytes.Buffer
	b.WriteString("digraph tree {\n")
	if opt.Title != "" {
		fmt.Fprintf(&b, "\tlabel=%s;\n\tlabelloc=t;\n", quote(clip(display(opt.Title), 2*opt.MaxLabel)))
	}
	b.WriteString("\tgraph [ordering=out, nodesep=0.25, ranksep=0.3, fontname=\"Helvetica\"];\n")
	b.WriteString("\tnode [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n")
	b.WriteString("\tedge [arrowsize=0.6, fontname=\"Helvetica\", fontsize=9];\n")
	if !opt.NoLegend {
		writeLegend(&b)
	}

	run := t.runs(opt.CollapseRuns)
	// Left out: a pruned node off the committed path (HidePruned), a node
	// past MaxDepth, and everything below them (a parent's ID is always
	// below its children's, so one pass in ID order sees parents first).
	hide := make([]bool, t.Len())
	for id, n := range t.All() {
		hide[id] = (opt.HidePruned && n.Status == Pruned && !n.Committed) || (opt.MaxDepth > 0 && n.Depth > opt.MaxDepth) ||
			(n.Parent != None && hide[n.Parent])
	}
	hidden := func(n *Node) bool { return hide[n.ID] }
	for id, n := range t.All() {
		if run[id] == 0 || hidden(n) {
			continue // inside a collapsed run, or left out
		}
		t.writeNode(&b, n, int(run[id]), opt.MaxLabel)
	}
	for id, n := range t.All() {
		if id == Root || run[id] == 0 || hidden(n) {
			continue // the root has no parent, a run member's edge is internal
		}
		p := t.Node(n.Parent)
		for run[p.ID] == 0 {
			p = t.Node(p.Parent)
		}
		var attrs []string
		if len(t.Node(n.Parent).Children) > 1 {
			attrs = append(attrs, "label="+quote(fmt.Sprintf("p=%.2f", math.Exp(n.LogProb))))
		}
		if n.Committed && p.Committed {
			attrs = append(attrs, "penwidth="+boldWidth)
		}
		if n.Status == Pruned {
			attrs = append(attrs, "style=dashed", "color="+quote(prunedColor))
		}
		fmt.Fprintf(&b, "\tn%d -> n%d", p.ID, id)
		writeAttrs(&b, attrs)
	}
	b.WriteString("}\n")
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("tree: writing DOT: %w", err)
	}
	return nil
}

// runs returns, for each node, the length of the box it heads: 1 for a
// node drawn alone, the run length for the head of a collapsed run, and 0
// for the other members of a run.
func (t *Tree) runs(minRun int) []int32 {
	run := make([]int32, t.n)
	for i := range run {
		run[i] = 1
	}
	if minRun < 2 {
		return run
	}
	// Routine steps in the calm quadrants collapse; forks, clarify
	// insertions, backspaces and the uncertain quadrants stay visible.
	chain := func(n *Node) bool {
		if n.ID == Root || len(n.Children) != 1 {
			return false
		}
		switch n.Action {
		case policy.Greedy, policy.Sample, policy.MultiSample, policy.Resample:
		default:
			return false
		}
		return n.Quadrant == policy.LELV || n.Quadrant == policy.Adaptive
	}
	same := func(a, b *Node) bool { return a.Status == b.Status && a.Committed == b.Committed }
	for id, n := range t.All() {
		if !chain(n) {
			continue
		}
		if p := t.Node(n.Parent); chain(p) && same(p, n) {
			continue // not the head of its run
		}
		length, last := 1, n
		for c := t.Node(last.Children[0]); chain(c) && same(last, c); c = t.Node(c.Children[0]) {
			length, last = length+1, c
		}
		if length < minRun {
			continue
		}
		run[id] = int32(length)
		for c := t.Node(n.Children[0]); c != last; c = t.Node(c.Children[0]) {
			run[c.ID] = 0
		}
		run[last.ID] = 0
	}
	return run
}

// writeNode writes the box of n, or of the run of size nodes n heads.
func (t *Tree) writeNode(b *bytes.Buffer, n *Node, size, maxLabel int) {
	var lines, attrs []string
	fill := quadrantColor(n.Quadrant)
	if n.ID == Root {
		fill = "#ffffff"
	}
	if n.Status == Pruned {
		fill += "80" // half transparent: greyed on the white page
	}
	switch {
	case n.ID == Root:
		lines = append(lines, "prompt", "“"+clip(display(n.Text), maxLabel)+"”")
		attrs = append(attrs, "fillcolor="+quote(fill))
	case size > 1:
		var text strings.Builder
		maxH, maxV := 0.0, 0.0
		action, mixedQ := n.Action.String(), false
		c := n
		for i := 0; i < size; i++ {
			text.WriteString(c.Text)
			maxH, maxV = max(maxH, c.Metrics.Entropy), max(maxV, c.Metrics.Varentropy)
			if c.Action != n.Action {
				action = "mixed"
			}
			mixedQ = mixedQ || c.Quadrant != n.Quadrant
			if i+1 < size {
				c = t.Node(c.Children[0])
			}
		}
		if mixedQ {
			fill = quadrantColor(policy.Adaptive)
			if n.Status == Pruned {
				fill += "80"
			}
		}
		lines = append(lines, "“"+clip(display(text.String()), maxLabel)+"”",
			fmt.Sprintf("×%d tokens, %s", size, action),
			fmt.Sprintf("H≤%.2f V≤%.2f", maxH, maxV),
			fmt.Sprintf("#%d..#%d", n.ID, c.ID))
		attrs = append(attrs, "shape=box3d", "fillcolor="+quote(fill))
	default:
		lines = append(lines, "“"+clip(display(n.Text), maxLabel)+"”",
			fmt.Sprintf("H=%.2f V=%.2f", n.Metrics.Entropy, n.Metrics.Varentropy),
			fmt.Sprintf("#%d %s", n.ID, n.Action))
		if n.IsLeaf() {
			lines = append(lines, fmt.Sprintf("Σlogp=%.2f score=%.2f", n.CumLogProb, n.Score))
		}
		attrs = append(attrs, "fillcolor="+quote(fill))
	}
	if n.Status != Live {
		line := n.Status.String()
		if n.Reason != "" {
			line += ": " + clip(display(n.Reason), maxLabel)
		}
		lines = append(lines, line)
	}
	switch n.Status {
	case Pruned:
		style := "rounded,filled,dashed"
		if size > 1 {
			style = "filled,dashed"
		}
		attrs = append(attrs, "style="+quote(style), "color="+quote(prunedColor), "fontcolor="+quote(prunedFont))
	case Finished:
		attrs = append(attrs, "peripheries=2")
	}
	if size > 1 && n.Status != Pruned {
		attrs = append(attrs, "style=filled")
	}
	if n.Committed {
		attrs = append(attrs, "penwidth="+boldWidth)
	}
	for i, l := range lines {
		lines[i] = escape(l)
	}
	fmt.Fprintf(b, "\tn%d [label=\"%s\"", n.ID, strings.Join(lines, `\n`))
	for _, a := range attrs {
		b.WriteString(", ")
		b.WriteString(a)
	}
	b.WriteString("];\n")
}

func writeLegend(b *bytes.Buffer) {
	items := []struct{ name, label, attrs string }{
		{"lelv", `LELV\nconfident`, `fillcolor="` + quadrantColors[policy.LELV] + `"`},
		{"helv", `HELV\nuniformly unsure`, `fillcolor="` + quadrantColors[policy.HELV] + `"`},
		{"lehv", `LEHV\nfew options`, `fillcolor="` + quadrantColors[policy.LEHV] + `"`},
		{"hehv", `HEHV\nlost`, `fillcolor="` + quadrantColors[policy.HEHV] + `"`},
		{"adaptive", `adaptive`, `fillcolor="` + quadrantColors[policy.Adaptive] + `"`},
		{"run", `collapsed run\nof routine steps`, `shape=box3d, style=filled, fillcolor="` + quadrantColors[policy.LELV] + `"`},
		{"pruned", `pruned`, `style="rounded,filled,dashed", color="` + prunedColor + `", fontcolor="` + prunedFont + `", fillcolor="#ffffff"`},
		{"finished", `finished`, `peripheries=2, fillcolor="#ffffff"`},
		{"committed", `committed path`, `penwidth=` + boldWidth + `, fillcolor="#ffffff"`},
	}
	b.WriteString("\tsubgraph cluster_legend {\n\t\tlabel=\"legend\";\n\t\tstyle=\"rounded,dashed\";\n\t\tcolor=\"" +
		prunedColor + "\";\n\t\tnode [fontsize=9];\n")
	for _, it := range items {
		fmt.Fprintf(b, "\t\tlegend_%s [label=\"%s\", %s];\n", it.name, it.label, it.attrs)
	}
	for i := 1; i < len(items); i++ {
		fmt.Fprintf(b, "\t\tlegend_%s -> legend_%s [style=invis];\n", items[i-1].name, items[i].name)
	}
	b.WriteString("\t}\n")
}

func writeAttrs(b *bytes.Buffer, attrs []string) {
	if len(attrs) > 0 {
		b.WriteString(" [")
		b.WriteString(strings.Join(attrs, ", "))
		b.WriteString("]")
	}
	b.WriteString(";\n")
}

// display makes text printable on one line: a newline becomes ⏎, a tab ⇥,
// other control or non-printable characters U+XXXX, bytes that are not
// UTF-8 \xNN.
func display(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02X`, s[i])
		case r == '\n':
			b.WriteString("⏎")
		case r == '\t':
			b.WriteString("⇥")
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			fmt.Fprintf(&b, "U+%04X", r)
		}
		i += size
	}
	return b.String()
}

// clip shortens s to maxRunes runes (negative: no limit), keeping its
// start and end around "…".
func clip(s string, maxRunes int) string {
	n := utf8.RuneCountInString(s)
	if maxRunes < 0 || n <= maxRunes {
		return s
	}
	if maxRunes < 3 {
		return "…"
	}
	head := (maxRunes - 1) / 2
	tail := maxRunes - 1 - head
	r := []rune(s)
	return string(r[:head]) + "…" + string(r[n-tail:])
}

// escape makes a display string safe inside a DOT double-quoted string:
// quotes and backslashes are escaped, and & is written as an entity because
// Graphviz decodes entities in labels.
func escape(s string) string {
	return dotEscaper.Replace(s)
}

var dotEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, `&`, `&amp;`)

func quote(s string) string { return `"` + escape(s) + `"` }

// ErrNoGraphviz is returned by WriteSVG when Graphviz's dot is not
// installed.
var ErrNoGraphviz = errors.New("tree: Graphviz dot not found in PATH (install graphviz)")

// WriteSVG renders the DOT of WriteDOT to SVG with Graphviz's dot -Tsvg.
// It returns an error wrapping ErrNoGraphviz when dot is not installed.
func (t *Tree) WriteSVG(w io.Writer, opt DOTOptions) error {
	return t.WriteSVGContext(context.Background(), w, opt)
}

// WriteSVGContext is WriteSVG that kills dot when ctx is done (a big tree
// can keep it busy for a minute).
func (t *Tree) WriteSVGContext(ctx context.Context, w io.Writer, opt DOTOptions) error {
	dot, err := exec.LookPath("dot")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoGraphviz, err)
	}
	var in, stderr bytes.Buffer
	if err := t.WriteDOT(&in, opt); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, dot, "-Tsvg")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, w, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("tree: %s -Tsvg: %w", dot, context.Cause(ctx))
		}
		return fmt.Errorf("tree: %s -Tsvg: %w: %s", dot, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
