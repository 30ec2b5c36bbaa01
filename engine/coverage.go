package engine

import (
	"slices"

	"github.com/entropix-search/entropix-search/tree"
)

// Path is one complete path a search chose its result among: a finished
// path of beam-adaptive or beam search, a sample of self-consistency or
// best-of-N, the one path of a single-path mode. Coverage (is the right
// answer among them?) and the verifier's verdicts are read from these.
type Path struct {
	// Node is the path's leaf in Result.Tree.
	Node tree.ID `json:"node"`
	// Text is the path's continuation, prompt excluded, stop token
	// excluded.
	Text string `json:"text"`
	// Verified is the verifier's probability that the path is right, when
	// the search had one (WithVerifier); 0 without.
	Verified float64 `json:"verified,omitempty"`
}

// paths lists the complete paths of the search's tree in ID order: the
// finished leaves, the live leaves that reached the token limit (a sample
// cut by it), and the committed path's leaf whatever its state.
func (s *search) paths() []Path {
	var out []Path
	for id, n := range s.t.All() {
		if id == tree.Root || !n.IsLeaf() {
			continue
		}
		if n.Status == tree.Finished || n.Committed || (n.Status == tree.Live && n.Depth >= s.b.MaxTokens) {
			out = append(out, Path{Node: id, Text: s.pathText(id, slices.DeleteFunc(s.t.Tokens(id), s.isStop)), Verified: s.verified[id]})
		}
	}
	return out
}
