package tree

import (
	"cmp"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"

	"github.com/entropix-search/entropix-search/policy"
)

// ID is the index of a node in its tree's arena.
type ID int32

const (
	// Root is the ID of the root node, which stands for the prompt.
	Root ID = 0
	// None is the ID of no node: the root's parent, or "not found".
	None ID = -1
)

// Status is the state of a node.
type Status uint8

const (
	// Live nodes may still grow; a live leaf is on the frontier.
	Live Status = iota
	// Finished nodes ended normally (end of sequence, maximum depth, ...).
	Finished
	// Pruned nodes were abandoned by the search.
	Pruned
)

var statusNames = [...]string{"live", "finished", "pruned"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", s)
}

// MarshalText encodes the status by name ("live", "finished" or "pruned").
func (s Status) MarshalText() ([]byte, error) {
	if int(s) >= len(statusNames) {
		return nil, fmt.Errorf("tree: invalid status %d", s)
	}
	return []byte(statusNames[s]), nil
}

// UnmarshalText decodes a status name.
func (s *Status) UnmarshalText(b []byte) error {
	for i, n := range statusNames {
		if n == string(b) {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("tree: unknown status %q (want live, finished or pruned)", b)
}

// Node is one token of the search tree. The tree sets ID, Parent, Children,
// Depth and CumLogProb; the engine fills in the rest.
type Node struct {
	ID       ID
	Parent   ID   // None for the root
	Children []ID // in the order they were added (ascending IDs)

	Token int    // -1 for the root (the prompt)
	Text  string // decoded piece of Token; for the root, the prompt text

	// LogProb is log p(Token | path) in nats under the untruncated
	// distribution; CumLogProb sums it from the root.
	LogProb    float64
	CumLogProb float64
	Depth      int // tokens after the root
	Step       int // engine step that produced the node

	Metrics  policy.Metrics  // of the distribution Token was chosen from
	Quadrant policy.Quadrant // of that distribution
	Action   policy.Action   // how Token was chosen
	Score    float64         // path score the engine assigned
	// Top are the most probable tokens of the distribution Token was
	// chosen from, most probable first, when the engine was asked for
	// them (engine.WithTopProbs); nil otherwise.
	Top []policy.Candidate

	Status    Status
	Reason    string // why finished or pruned ("eos", "max-depth", "kv-full", ...)
	Committed bool   // on the chosen path
}

// IsLeaf reports whether n has no children.
func (n *Node) IsLeaf() bool { return len(n.Children) == 0 }

// The arena is a list of fixed-size chunks: appending never moves a node,
// so *Node pointers stay valid for the life of the tree.
const (
	chunkShift = 8
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
)

// Tree is a search tree over one prompt. The zero value is not usable: call
// New. A Tree is not safe for concurrent use.
type Tree struct {
	chunks [][]Node // each of capacity chunkSize
	n      int      // nodes in the arena
	prompt []int    // prompt tokens
	stack  []ID     // scratch for subtree walks
}

// New returns a tree whose root stands for the prompt: Token -1, Text
// promptText. The prompt tokens are copied.
func New(promptText string, promptTokens []int) *Tree {
	t := &Tree{}
	if len(promptTokens) > 0 {
		t.prompt = slices.Clone(promptTokens)
	}
	t.push(Node{ID: Root, Parent: None, Token: -1, Text: promptText})
	return t
}

// push appends n to the arena as is and returns its address.
func (t *Tree) push(n Node) *Node {
	if t.n&chunkMask == 0 {
		t.chunks = append(t.chunks, make([]Node, 0, chunkSize))
	}
	c := &t.chunks[len(t.chunks)-1]
	*c = append(*c, n)
	t.n++
	return &(*c)[len(*c)-1]
}

// Prompt returns the prompt tokens (do not modify).
func (t *Tree) Prompt() []int { return t.prompt }

// Len returns the number of nodes, the root included.
func (t *Tree) Len() int { return t.n }

// Node returns the node id, or nil when id is not in the tree. The pointer
// stays valid as the tree grows: the arena never moves a node.
func (t *Tree) Node(id ID) *Node {
	if id < 0 || int(id) >= t.n {
		return nil
	}
	return &t.chunks[id>>chunkShift][id&chunkMask]
}

// All yields every node in ID order (parents before children).
func (t *Tree) All() iter.Seq2[ID, *Node] {
	return func(yield func(ID, *Node) bool) {
		for i := range t.n {
			if !yield(ID(i), t.Node(ID(i))) {
				return
			}
		}
	}
}

// Add appends n as the last child of parent and returns its ID. It sets
// n's ID, Parent, Depth (parent's + 1) and CumLogProb (parent's + n.LogProb)
// and clears its Children; every other field is kept as given. Add returns
// None, adding nothing, when parent is not in the tree or the tree holds
// math.MaxInt32 nodes.
func (t *Tree) Add(parent ID, n Node) ID {
	p := t.Node(parent)
	if p == nil || t.n >= math.MaxInt32 {
		return None
	}
	id := ID(t.n)
	n.ID, n.Parent, n.Children = id, parent, nil
	n.Depth = p.Depth + 1
	n.CumLogProb = p.CumLogProb + n.LogProb
	t.push(n)
	p.Children = append(p.Children, id)
	return id
}

// Path returns the IDs from the root to id, both included (nil when id is
// not in the tree).
func (t *Tree) Path(id ID) []ID {
	n := t.Node(id)
	if n == nil {
		return nil
	}
	path := make([]ID, n.Depth+1)
	for i := n.Depth; i >= 0 && n != nil; i-- {
		path[i] = n.ID
		n = t.Node(n.Parent)
	}
	return path
}

// Tokens returns the tokens from the root (excluded) to id (included).
func (t *Tree) Tokens(id ID) []int {
	n := t.Node(id)
	if n == nil {
		return nil
	}
	toks := make([]int, n.Depth)
	for i := n.Depth - 1; i >= 0 && n != nil; i-- {
		toks[i] = n.Token
		n = t.Node(n.Parent)
	}
	return toks
}

// Text returns the concatenated Text of the nodes from the root (excluded)
// to id (included).
func (t *Tree) Text(id ID) string {
	path := t.Path(id)
	if len(path) < 2 {
		return ""
	}
	size := 0
	for _, p := range path[1:] {
		size += len(t.Node(p).Text)
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range path[1:] {
		b.WriteString(t.Node(p).Text)
	}
	return b.String()
}

// Leaves returns the leaves with the given status in ID order. A tree of
// only the root has the root as its one (live) leaf.
func (t *Tree) Leaves(status Status) []ID {
	var out []ID
	for id, n := range t.All() {
		if n.IsLeaf() && n.Status == status {
			out = append(out, id)
		}
	}
	return out
}

// Walk calls fn on id and its descendants in depth-first preorder, children
// in order. When fn returns false the node's children are skipped. fn must
// not add nodes.
func (t *Tree) Walk(id ID, fn func(*Node) bool) {
	if t.Node(id) == nil {
		return
	}
	// Take the scratch stack so that a nested Walk from fn gets its own.
	stack := append(t.stack[:0], id)
	t.stack = nil
	for len(stack) > 0 {
		n := t.Node(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		if !fn(n) {
			continue
		}
		for i := len(n.Children) - 1; i >= 0; i-- {
			stack = append(stack, n.Children[i])
		}
	}
	t.stack = stack[:0]
}

// PruneSubtree marks every Live node of the subtree of id (id included)
// Pruned with reason and calls release (when not nil) with every node of
// the subtree, in walk order, so that the engine frees what it holds for
// them (a live leaf's KV sequence: the tree holds no cache handles).
// Finished and already pruned nodes keep their status and reason. It
// returns the number of nodes it pruned.
func (t *Tree) PruneSubtree(id ID, reason string, release func(ID)) int {
	count := 0
	t.Walk(id, func(n *Node) bool {
		if n.Status == Live {
			n.Status, n.Reason = Pruned, reason
			count++
		}
		if release != nil {
			release(n.ID)
		}
		return true
	})
	return count
}

// Finish marks the live node id Finished with reason and calls release
// (when not nil) with it, as PruneSubtree does. It reports whether id was a
// live node.
func (t *Tree) Finish(id ID, reason string, release func(ID)) bool {
	n := t.Node(id)
	if n == nil || n.Status != Live {
		return false
	}
	n.Status, n.Reason = Finished, reason
	if release != nil {
		release(id)
	}
	return true
}

// Commit makes root..id the committed path: it marks those nodes Committed
// and clears the mark everywhere else. It costs O(Len) and does nothing when
// id is not in the tree.
func (t *Tree) Commit(id ID) {
	if t.Node(id) == nil {
		return
	}
	for _, n := range t.All() {
		n.Committed = false
	}
	for n := t.Node(id); n != nil; n = t.Node(n.Parent) {
		n.Committed = true
	}
}

// Best returns the leaf with the highest score among the leaves for which
// filter returns true, or None when there is none. A nil score uses
// Node.Score, a nil filter accepts every leaf. NaN scores rank below all
// others; ties go to the lowest ID.
func (t *Tree) Best(score func(*Node) float64, filter func(*Node) bool) ID {
	best, bestScore := None, 0.0
	for id, n := range t.All() {
		if !n.IsLeaf() || (filter != nil && !filter(n)) {
			continue
		}
		s := n.Score
		if score != nil {
			s = score(n)
		}
		if best == None || cmp.Compare(s, bestScore) > 0 {
			best, bestScore = id, s
		}
	}
	return best
}
