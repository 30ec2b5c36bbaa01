package tree

import (
	"math"
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/policy"
)

// sampleTree builds
//
//	root "Once" ─ 1 " upon" ─ 2 " a" ┬ 3 " time" ─ 5 "." (finished eos)
//	                                 └ 4 " day"  ─ 6 "," ─ 7 " the" (live)
func sampleTree(t testing.TB) (*Tree, map[string]ID) {
	t.Helper()
	tr := New("Once", []int{1, 9038})
	ids := map[string]ID{}
	add := func(name string, parent ID, n Node) {
		id := tr.Add(parent, n)
		if id == None {
			t.Fatalf("Add(%d, %q) = None", parent, n.Text)
		}
		ids[name] = id
	}
	lelv := policy.Metrics{Entropy: 0.05, Varentropy: 0.02}
	add("upon", Root, Node{Token: 2501, Text: " upon", LogProb: -0.1, Metrics: lelv, Quadrant: policy.LELV, Step: 1})
	add("a", ids["upon"], Node{Token: 263, Text: " a", LogProb: -0.2, Metrics: lelv, Quadrant: policy.LELV, Step: 2})
	lehv := policy.Metrics{Entropy: 1.5, Varentropy: 6.25,
		Attention: policy.AttentionMetrics{Entropy: 3.5, Varentropy: 0.25, Agreement: 0.125, Interaction: 2}}
	add("time", ids["a"], Node{Token: 931, Text: " time", LogProb: -0.5, Metrics: lehv, Quadrant: policy.LEHV, Action: policy.Branch, Step: 3})
	add("day", ids["a"], Node{Token: 2462, Text: " day", LogProb: -1.25, Metrics: lehv, Quadrant: policy.LEHV, Action: policy.Branch, Step: 3})
	add("dot", ids["time"], Node{Token: 29889, Text: ".", LogProb: -0.75, Metrics: lelv, Action: policy.Sample, Quadrant: policy.HELV, Step: 4,
		Status: Finished, Reason: "eos", Score: -1.5})
	add("comma", ids["day"], Node{Token: 29892, Text: ",", LogProb: -2, Quadrant: policy.HEHV, Action: policy.Resample, Step: 4})
	add("the", ids["comma"], Node{Token: 278, Text: " the", LogProb: -0.5, Quadrant: policy.Adaptive, Action: policy.MultiSample, Step: 5, Score: -4})
	return tr, ids
}

func TestPathTokensText(t *testing.T) {
	tr, ids := sampleTree(t)
	if got, want := tr.Len(), 8; got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
	the := ids["the"]
	if got, want := tr.Path(the), []ID{Root, ids["upon"], ids["a"], ids["day"], ids["comma"], the}; !slices.Equal(got, want) {
		t.Errorf("Path = %v, want %v", got, want)
	}
	if got, want := tr.Tokens(the), []int{2501, 263, 2462, 29892, 278}; !slices.Equal(got, want) {
		t.Errorf("Tokens = %v, want %v", got, want)
	}
	if got, want := tr.Text(the), " upon a day, the"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	if got := tr.Path(Root); !slices.Equal(got, []ID{Root}) {
		t.Errorf("Path(Root) = %v", got)
	}
	if got := tr.Tokens(Root); len(got) != 0 {
		t.Errorf("Tokens(Root) = %v, want none", got)
	}
	if got := tr.Text(Root); got != "" {
		t.Errorf("Text(Root) = %q, want empty", got)
	}
	if tr.Path(99) != nil || tr.Tokens(-1) != nil || tr.Text(99) != "" || tr.Node(99) != nil || tr.Node(None) != nil {
		t.Error("unknown IDs should give nil or empty results")
	}
	if got := tr.Node(Root); got.Token != -1 || got.Text != "Once" || got.Parent != None {
		t.Errorf("root = %+v", got)
	}
	if got := tr.Prompt(); !slices.Equal(got, []int{1, 9038}) {
		t.Errorf("Prompt = %v", got)
	}
}

func TestAddSetsDepthAndCumLogProb(t *testing.T) {
	tr, ids := sampleTree(t)
	n := tr.Node(ids["the"])
	if n.Depth != 5 {
		t.Errorf("Depth = %d, want 5", n.Depth)
	}
	want := -0.1 + -0.2 + -1.25 + -2 + -0.5
	if math.Abs(n.CumLogProb-want) > 1e-12 {
		t.Errorf("CumLogProb = %v, want %v", n.CumLogProb, want)
	}
	if got := tr.Node(ids["a"]).Children; !slices.Equal(got, []ID{ids["time"], ids["day"]}) {
		t.Errorf("children of a = %v", got)
	}
	// Add overrides the structural fields it owns.
	id := tr.Add(ids["the"], Node{ID: 77, Parent: 3, Children: []ID{1}, Depth: 40, CumLogProb: 9, LogProb: -1})
	m := tr.Node(id)
	if m.ID != id || m.Parent != ids["the"] || m.Children != nil || m.Depth != 6 || m.CumLogProb != n.CumLogProb-1 {
		t.Errorf("added node = %+v", m)
	}
	if got := tr.Add(1000, Node{}); got != None {
		t.Errorf("Add to unknown parent = %d, want None", got)
	}
}

func TestNodePointersStable(t *testing.T) {
	tr := New("", nil)
	first := tr.Node(Root)
	cur := Root
	var ptrs []*Node
	for i := range 3*chunkSize + 7 {
		cur = tr.Add(cur, Node{Token: i, Text: "x"})
		ptrs = append(ptrs, tr.Node(cur))
	}
	if tr.Node(Root) != first {
		t.Fatal("root moved")
	}
	for i, p := range ptrs {
		if p != tr.Node(ID(i+1)) || p.Token != i {
			t.Fatalf("node %d moved or changed", i+1)
		}
	}
	if got := len(tr.Text(cur)); got != 3*chunkSize+7 {
		t.Errorf("len(Text) = %d", got)
	}
}

func TestLeavesAndWalk(t *testing.T) {
	tr, ids := sampleTree(t)
	if got := tr.Leaves(Live); !slices.Equal(got, []ID{ids["the"]}) {
		t.Errorf("live leaves = %v", got)
	}
	if got := tr.Leaves(Finished); !slices.Equal(got, []ID{ids["dot"]}) {
		t.Errorf("finished leaves = %v", got)
	}
	if got := New("p", nil).Leaves(Live); !slices.Equal(got, []ID{Root}) {
		t.Errorf("leaves of a bare root = %v", got)
	}
	var order []ID
	tr.Walk(Root, func(n *Node) bool {
		order = append(order, n.ID)
		return n.ID != ids["day"] // skip below "day"
	})
	want := []ID{Root, ids["upon"], ids["a"], ids["time"], ids["dot"], ids["day"]}
	if !slices.Equal(order, want) {
		t.Errorf("Walk order = %v, want %v", order, want)
	}
	// Nested walks do not disturb each other.
	count := 0
	tr.Walk(ids["a"], func(*Node) bool {
		tr.Walk(ids["day"], func(*Node) bool { count++; return true })
		return true
	})
	if count != 6*3 {
		t.Errorf("nested walk visited %d, want 18", count)
	}
}

// TestPruneSubtreeReleases: PruneSubtree and Finish call back with every
// node they end (the engine frees what it holds for them), prune only live
// nodes, and leave finished ones as they are.
func TestPruneSubtreeReleases(t *testing.T) {
	tr := New("prompt", []int{1, 2, 3})
	var kids []ID
	for i := range 3 {
		kids = append(kids, tr.Add(Root, Node{Token: 10 + i}))
	}
	grand := tr.Add(kids[1], Node{Token: 20})
	var released []ID
	release := func(id ID) { released = append(released, id) }
	if !tr.Finish(kids[2], "eos", release) || tr.Node(kids[2]).Status != Finished {
		t.Fatal("Finish should mark the node")
	}
	if tr.Finish(kids[2], "again", release) {
		t.Error("Finish of a finished node should report false")
	}
	if got := tr.PruneSubtree(kids[1], "below-sibling", release); got != 2 {
		t.Errorf("pruned %d nodes, want 2", got)
	}
	if got := tr.PruneSubtree(kids[1], "again", nil); got != 0 {
		t.Errorf("second prune pruned %d nodes, want 0", got)
	}
	if n := tr.Node(grand); n.Status != Pruned || n.Reason != "below-sibling" {
		t.Errorf("grandchild = %+v", n)
	}
	if !slices.Equal(released, []ID{kids[2], kids[1], grand}) {
		t.Errorf("released %v, want %v", released, []ID{kids[2], kids[1], grand})
	}
	if got := tr.PruneSubtree(Root, "budget", nil); got != 2 { // the root and kids[0]
		t.Errorf("pruning the rest pruned %d, want 2", got)
	}
	if n := tr.Node(kids[2]); n.Status != Finished || n.Reason != "eos" {
		t.Errorf("finished node changed by prune: %+v", n)
	}
	if got := tr.PruneSubtree(99, "x", nil); got != 0 {
		t.Errorf("prune of unknown node = %d", got)
	}
}

func TestCommit(t *testing.T) {
	tr, ids := sampleTree(t)
	tr.Commit(ids["comma"])
	tr.Commit(ids["dot"])
	want := map[ID]bool{Root: true, ids["upon"]: true, ids["a"]: true, ids["time"]: true, ids["dot"]: true}
	for id, n := range tr.All() {
		if n.Committed != want[id] {
			t.Errorf("node %d committed = %v, want %v", id, n.Committed, want[id])
		}
	}
}

func TestBest(t *testing.T) {
	tr, ids := sampleTree(t)
	if got := tr.Best(nil, nil); got != ids["dot"] { // Score -1.5 > -4
		t.Errorf("Best by Score = %d, want %d", got, ids["dot"])
	}
	byCum := func(n *Node) float64 { return n.CumLogProb }
	live := func(n *Node) bool { return n.Status == Live }
	if got := tr.Best(byCum, live); got != ids["the"] {
		t.Errorf("best live = %d, want %d", got, ids["the"])
	}
	if got := tr.Best(nil, func(*Node) bool { return false }); got != None {
		t.Errorf("Best with nothing passing = %d, want None", got)
	}
	nan := func(n *Node) float64 {
		if n.ID == ids["dot"] {
			return math.NaN()
		}
		return n.Score
	}
	if got := tr.Best(nan, nil); got != ids["the"] {
		t.Errorf("NaN should rank last: Best = %d", got)
	}
	tie := func(*Node) float64 { return 1 }
	if got := tr.Best(tie, nil); got != ids["dot"] {
		t.Errorf("tie should go to the lowest ID: Best = %d", got)
	}
}

func TestStatusText(t *testing.T) {
	for _, s := range []Status{Live, Finished, Pruned} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Status
		if err := got.UnmarshalText(b); err != nil || got != s {
			t.Errorf("%v round-trips to %v, %v", s, got, err)
		}
	}
	if _, err := Status(9).MarshalText(); err == nil {
		t.Error("MarshalText of an invalid status should fail")
	}
	var s Status
	if err := s.UnmarshalText([]byte("dead")); err == nil {
		t.Error("UnmarshalText of an unknown name should fail")
	}
	if Status(9).String() != "Status(9)" {
		t.Error(Status(9).String())
	}
}
