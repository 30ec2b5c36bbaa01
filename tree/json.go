package tree

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/entropix-search/entropix-search/policy"
)

// The JSON form of a tree is
//
//	{"prompt_tokens": [...], "nodes": [{"id": 0, "parent": -1, ...}, ...]}
//
// with the nodes in ID order and every Node field but Seq. Every number
// is a JSON number: a float that is not finite (a log-probability of -Inf,
// a NaN score) is null, read back as NaN (JSON has no such numbers, and
// strings in their place break the readers that expect numbers; files
// written with the strings "NaN", "+Inf" and "-Inf" are still read). A text
// that is not valid UTF-8 is also given exactly, base64-encoded, in
// text_bytes (its "text" then has U+FFFD in place of the bad bytes).

type jsonTree struct {
	PromptTokens []int      `json:"prompt_tokens"`
	Nodes        []jsonNode `json:"nodes"`
}

type jsonNode struct {
	ID         ID              `json:"id"`
	Parent     ID              `json:"parent"`
	Children   []ID            `json:"children"`
	Token      int             `json:"token"`
	Text       string          `json:"text"`
	TextBytes  []byte          `json:"text_bytes,omitempty"`
	LogProb    jsonFloat       `json:"logprob"`
	CumLogProb jsonFloat       `json:"cum_logprob"`
	Depth      int             `json:"depth"`
	Step       int             `json:"step"`
	Metrics    jsonMetrics     `json:"metrics"`
	Quadrant   policy.Quadrant `json:"quadrant"`
	Action     policy.Action   `json:"action"`
	Score      jsonFloat       `json:"score"`
	Status     Status          `json:"status"`
	Reason     string          `json:"reason"`
	Committed  bool            `json:"committed"`
	Top        []jsonCandidate `json:"top,omitempty"`
}

// jsonCandidate is one of a node's most probable tokens.
type jsonCandidate struct {
	Token   int       `json:"token"`
	LogProb jsonFloat `json:"logprob"`
}

// jsonMetrics mirrors policy.Metrics with the same names, through jsonFloat.
type jsonMetrics struct {
	Entropy    jsonFloat     `json:"entropy"`
	Varentropy jsonFloat     `json:"varentropy"`
	Attention  jsonAttention `json:"attention,omitzero"`
}

type jsonAttention struct {
	Entropy     jsonFloat `json:"entropy"`
	Varentropy  jsonFloat `json:"varentropy"`
	Agreement   jsonFloat `json:"agreement"`
	Interaction jsonFloat `json:"interaction"`
}

// jsonFloat is a float64 that encodes NaN and ±Inf as null.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte(`null`), nil
	}
	// The shortest representation that parses back to v.
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `null`, `"NaN"`:
		*f = jsonFloat(math.NaN())
		return nil
	case `"+Inf"`:
		*f = jsonFloat(math.Inf(1))
		return nil
	case `"-Inf"`:
		*f = jsonFloat(math.Inf(-1))
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil || len(b) == 0 || b[0] == '"' {
		return fmt.Errorf("tree: %.40q is not a number or null", b)
	}
	*f = jsonFloat(v)
	return nil
}

func toJSON(n *Node) jsonNode {
	jn := jsonNode{
		ID: n.ID, Parent: n.Parent, Children: n.Children,
		Token: n.Token, Text: n.Text,
		LogProb: jsonFloat(n.LogProb), CumLogProb: jsonFloat(n.CumLogProb),
		Depth: n.Depth, Step: n.Step,
		Metrics: jsonMetrics{
			Entropy: jsonFloat(n.Metrics.Entropy), Varentropy: jsonFloat(n.Metrics.Varentropy),
			Attention: jsonAttention{
				Entropy:     jsonFloat(n.Metrics.Attention.Entropy),
				Varentropy:  jsonFloat(n.Metrics.Attention.Varentropy),
				Agreement:   jsonFloat(n.Metrics.Attention.Agreement),
				Interaction: jsonFloat(n.Metrics.Attention.Interaction),
			},
		},
		Quadrant: n.Quadrant, Action: n.Action, Score: jsonFloat(n.Score),
		Status: n.Status, Reason: n.Reason, Committed: n.Committed,
	}
	if jn.Children == nil {
		jn.Children = []ID{}
	}
	for _, c := range n.Top {
		jn.Top = append(jn.Top, jsonCandidate{Token: c.Token, LogProb: jsonFloat(c.LogProb)})
	}
	if !utf8.ValidString(n.Text) {
		jn.TextBytes = []byte(n.Text)
	}
	return jn
}

func fromJSON(jn *jsonNode) Node {
	n := Node{
		ID: jn.ID, Parent: jn.Parent, Token: jn.Token, Text: jn.Text,
		LogProb: float64(jn.LogProb), CumLogProb: float64(jn.CumLogProb),
		Depth: jn.Depth, Step: jn.Step,
		Metrics: policy.Metrics{
			Entropy: float64(jn.Metrics.Entropy), Varentropy: float64(jn.Metrics.Varentropy),
			Attention: policy.AttentionMetrics{
				Entropy:     float64(jn.Metrics.Attention.Entropy),
				Varentropy:  float64(jn.Metrics.Attention.Varentropy),
				Agreement:   float64(jn.Metrics.Attention.Agreement),
				Interaction: float64(jn.Metrics.Attention.Interaction),
			},
		},
		Quadrant: jn.Quadrant, Action: jn.Action, Score: float64(jn.Score),
		Status: jn.Status, Reason: jn.Reason, Committed: jn.Committed,
	}
	if jn.TextBytes != nil {
		n.Text = string(jn.TextBytes)
	}
	for _, c := range jn.Top {
		n.Top = append(n.Top, policy.Candidate{Token: c.Token, LogProb: float64(c.LogProb)})
	}
	if len(jn.Children) > 0 {
		n.Children = jn.Children
	}
	return n
}

// MarshalJSON encodes every field of n but Seq, as in a tree's JSON.
func (n Node) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(toJSON(&n))
	if err != nil {
		return nil, fmt.Errorf("tree: encoding node %d: %w", n.ID, err)
	}
	return b, nil
}

// UnmarshalJSON decodes a node encoded by MarshalJSON. Seq becomes nil; the
// structure (ID, Parent, Children, Depth) is taken as is, unchecked.
func (n *Node) UnmarshalJSON(b []byte) error {
	var jn jsonNode
	if err := json.Unmarshal(b, &jn); err != nil {
		return fmt.Errorf("tree: decoding node: %w", err)
	}
	*n = fromJSON(&jn)
	return nil
}

// MarshalJSON encodes every field of every node but Seq.
func (t *Tree) MarshalJSON() ([]byte, error) {
	jt := jsonTree{PromptTokens: t.prompt, Nodes: make([]jsonNode, 0, t.n)}
	if jt.PromptTokens == nil {
		jt.PromptTokens = []int{}
	}
	for _, n := range t.All() {
		jt.Nodes = append(jt.Nodes, toJSON(n))
	}
	b, err := json.Marshal(jt)
	if err != nil {
		return nil, fmt.Errorf("tree: encoding JSON: %w", err)
	}
	return b, nil
}

var errNoRoot = errors.New("tree: JSON tree has no nodes (want at least the root)")

// UnmarshalJSON replaces t with the tree encoded in b, after checking that
// it is a tree: node i has ID i, the root is node 0 with parent -1 and token
// -1, every other node's parent comes before it, depths follow the parents
// and children lists match the parents. No node has a Seq.
func (t *Tree) UnmarshalJSON(b []byte) error {
	var jt jsonTree
	if err := json.Unmarshal(b, &jt); err != nil {
		return fmt.Errorf("tree: decoding JSON: %w", err)
	}
	if len(jt.Nodes) == 0 {
		return errNoRoot
	}
	if len(jt.Nodes) > math.MaxInt32 {
		return fmt.Errorf("tree: JSON tree has %d nodes, more than %d", len(jt.Nodes), math.MaxInt32)
	}
	nt := &Tree{}
	if len(jt.PromptTokens) > 0 {
		nt.prompt = jt.PromptTokens
	}
	for i := range jt.Nodes {
		jn := &jt.Nodes[i]
		if jn.ID != ID(i) {
			return fmt.Errorf("tree: JSON node %d has id %d", i, jn.ID)
		}
		n := fromJSON(jn)
		n.Children = nil // rebuilt from the parents, then checked
		if i == 0 {
			if n.Parent != None || n.Token != -1 || n.Depth != 0 {
				return fmt.Errorf("tree: JSON root has parent %d, token %d, depth %d (want -1, -1, 0)",
					n.Parent, n.Token, n.Depth)
			}
		} else {
			if n.Parent < 0 || int(n.Parent) >= i {
				return fmt.Errorf("tree: JSON node %d has parent %d, want an earlier node", i, n.Parent)
			}
			p := nt.Node(n.Parent)
			if n.Depth != p.Depth+1 {
				return fmt.Errorf("tree: JSON node %d has depth %d, its parent %d depth %d", i, n.Depth, p.ID, p.Depth)
			}
			p.Children = append(p.Children, n.ID)
		}
		nt.push(n)
	}
	for id, n := range nt.All() {
		if want := jt.Nodes[id].Children; !slices.Equal(n.Children, want) {
			return fmt.Errorf("tree: JSON node %d lists children %v, its children are %v", id, want, n.Children)
		}
	}
	*t = *nt
	return nil
}
