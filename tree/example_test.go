package tree_test

import (
	"fmt"
	"os"

	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// A two-way fork after a greedy start: the losing branch is pruned, the
// other finishes and becomes the committed path.
func Example() {
	t := tree.New("Once", []int{1, 9038})
	sure := policy.Metrics{Entropy: 0.04, Varentropy: 0.01}
	torn := policy.Metrics{Entropy: 1.3, Varentropy: 6.2}
	upon := t.Add(tree.Root, tree.Node{Token: 2501, Text: " upon", LogProb: -0.05, Metrics: sure, Quadrant: policy.LELV})
	a := t.Add(upon, tree.Node{Token: 263, Text: " a", LogProb: -0.1, Metrics: sure, Quadrant: policy.LELV})
	time := t.Add(a, tree.Node{Token: 931, Text: " time", LogProb: -0.4, Metrics: torn, Quadrant: policy.LEHV, Action: policy.Branch})
	day := t.Add(a, tree.Node{Token: 2462, Text: " day", LogProb: -1.2, Metrics: torn, Quadrant: policy.LEHV, Action: policy.Branch})

	t.PruneSubtree(day, "below-sibling", nil)
	t.Finish(time, "eos", nil)
	for _, id := range t.Leaves(tree.Finished) {
		t.Node(id).Score = t.Node(id).CumLogProb
	}
	best := t.Best(nil, func(n *tree.Node) bool { return n.Status == tree.Finished })
	t.Commit(best)
	fmt.Printf("best %q, logp %.2f\n", t.Text(best), t.Node(best).CumLogProb)
	if err := t.WriteDOT(os.Stdout, tree.DOTOptions{NoLegend: true}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// best " upon a time", logp -0.55
	// digraph tree {
	// 	graph [ordering=out, nodesep=0.25, ranksep=0.3, fontname="Helvetica"];
	// 	node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];
	// 	edge [arrowsize=0.6, fontname="Helvetica", fontsize=9];
	// 	n0 [label="prompt\n“Once”", fillcolor="#ffffff", penwidth=3];
	// 	n1 [label="“ upon”\nH=0.04 V=0.01\n#1 greedy", fillcolor="#b7e4c7", penwidth=3];
	// 	n2 [label="“ a”\nH=0.04 V=0.01\n#2 greedy", fillcolor="#b7e4c7", penwidth=3];
	// 	n3 [label="“ time”\nH=1.30 V=6.20\n#3 branch\nΣlogp=-0.55 score=-0.55\nfinished: eos", fillcolor="#a0c4ff", peripheries=2, penwidth=3];
	// 	n4 [label="“ day”\nH=1.30 V=6.20\n#4 branch\nΣlogp=-1.35 score=0.00\npruned: below-sibling", fillcolor="#a0c4ff80", style="rounded,filled,dashed", color="#9e9e9e", fontcolor="#616161"];
	// 	n0 -> n1 [penwidth=3];
	// 	n1 -> n2 [penwidth=3];
	// 	n2 -> n3 [label="p=0.67", penwidth=3];
	// 	n2 -> n4 [label="p=0.30", style=dashed, color="#9e9e9e"];
	// }
}

func ExampleFrontier() {
	f := tree.NewFrontier()
	f.Push(1, -2.5)
	f.Push(2, -0.7)
	f.Push(3, -1.1)
	f.Remove(3) // its branch was pruned
	f.Push(1, -0.1)
	for f.Len() > 0 {
		id, p, _ := f.Pop()
		fmt.Println(id, p)
	}
	// Output:
	// 1 -0.1
	// 2 -0.7
}
