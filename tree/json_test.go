package tree

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/policy"
)

// nodesOf copies the nodes of tr.
func nodesOf(tr *Tree) []Node {
	var out []Node
	for _, n := range tr.All() {
		out = append(out, *n)
	}
	return out
}

func roundTrip(t *testing.T, tr *Tree) *Tree {
	t.Helper()
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var got Tree
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return &got
}

func TestJSONRoundTrip(t *testing.T) {
	tr, ids := sampleTree(t)
	tr.PruneSubtree(ids["day"], "below-sibling", nil)
	tr.Commit(ids["dot"])
	// Values that stress the encoding: awkward floats, -0, invalid UTF-8
	// and every enum.
	n := tr.Node(ids["a"])
	n.LogProb, n.Score, n.Step = math.SmallestNonzeroFloat64, math.Copysign(0, -1), min(1<<40, math.MaxInt)
	n.Metrics = policy.Metrics{Entropy: 0.1 + 0.2, Varentropy: math.MaxFloat64,
		Attention: policy.AttentionMetrics{Entropy: 1e-300, Varentropy: 1.0 / 3, Agreement: math.Copysign(0, -1), Interaction: 123456789.123456789}}
	tr.Node(ids["comma"]).Text = "\xe2\x96" // half a UTF-8 character, as byte-level BPE emits
	tr.Node(ids["time"]).Text = "\"quoted\"\n\\ <&>"
	tr.Node(Root).Text = "Once\x00"

	got := roundTrip(t, tr)
	if !reflect.DeepEqual(nodesOf(got), nodesOf(tr)) {
		t.Errorf("round trip changed the nodes:\n got %+v\nwant %+v", nodesOf(got), nodesOf(tr))
	}
	if !reflect.DeepEqual(got.Prompt(), tr.Prompt()) {
		t.Errorf("prompt %v, want %v", got.Prompt(), tr.Prompt())
	}
	if math.Signbit(got.Node(ids["a"]).Score) != true {
		t.Error("-0 lost its sign")
	}
	// The decoded tree works: Add after decoding keeps the arena valid.
	id := got.Add(ids["the"], Node{Token: 5, Text: "!"})
	if got.Text(id) != " upon a day\xe2\x96 the!" {
		t.Errorf("Text after decode = %q", got.Text(id))
	}
	// A bare tree without prompt tokens round-trips too.
	bare := New("", nil)
	if got := roundTrip(t, bare); !reflect.DeepEqual(nodesOf(got), nodesOf(bare)) || got.Prompt() != nil {
		t.Errorf("bare tree round trip: %+v", nodesOf(got))
	}
}

func TestJSONNonFinite(t *testing.T) {
	tr := New("p", []int{1})
	id := tr.Add(Root, Node{Token: 3, LogProb: math.Inf(-1), Score: math.NaN(),
		Metrics: policy.Metrics{Entropy: math.Inf(1)}})
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	// Numbers stay numbers: not-finite ones are null (issue 19).
	for _, want := range []string{`"logprob":null`, `"score":null`, `"entropy":null`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
	if bytes.Contains(b, []byte(`"NaN"`)) || bytes.Contains(b, []byte(`Inf"`)) {
		t.Errorf("JSON holds a number as a string: %s", b)
	}
	got := roundTrip(t, tr)
	n := got.Node(id)
	if !math.IsNaN(n.LogProb) || !math.IsNaN(n.Score) || !math.IsNaN(n.Metrics.Entropy) {
		t.Errorf("non-finite values not read back as NaN: %+v", n)
	}
	// Files from earlier versions, with the strings, still read.
	old := []byte(`{"prompt_tokens":[1],"nodes":[{"id":0,"parent":-1,"token":-1,"children":[1]},{"id":1,"parent":0,"depth":1,"logprob":"-Inf","score":"NaN"}]}`)
	var back Tree
	if err := json.Unmarshal(old, &back); err != nil || !math.IsInf(back.Node(1).LogProb, -1) {
		t.Errorf("old strings: %v, %+v", err, back.Node(1))
	}
}

func TestJSONFields(t *testing.T) {
	tr, _ := sampleTree(t)
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Nodes []map[string]json.RawMessage `json:"nodes"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	want := []string{"id", "parent", "children", "token", "text", "logprob", "cum_logprob", "depth", "step",
		"metrics", "quadrant", "action", "score", "status", "reason", "committed"}
	for _, k := range want {
		if _, ok := raw.Nodes[3][k]; !ok {
			t.Errorf("node JSON lacks %q: %s", k, b)
		}
	}
	if got := string(raw.Nodes[3]["metrics"]); !strings.Contains(got, `"attention":{"entropy":3.5`) {
		t.Errorf("metrics = %s", got)
	}
	if got := string(raw.Nodes[3]["quadrant"]) + string(raw.Nodes[3]["action"]) + string(raw.Nodes[5]["status"]); got != `"LEHV""branch""finished"` {
		t.Errorf("enums = %s", got)
	}
}

func TestJSONRejectsBadTrees(t *testing.T) {
	root := `{"id":0,"parent":-1,"children":[1],"token":-1,"depth":0}`
	for name, in := range map[string]string{
		"not JSON":        `{`,
		"no nodes":        `{"nodes":[]}`,
		"bad root":        `{"nodes":[{"id":0,"parent":0,"token":-1}]}`,
		"wrong id":        `{"nodes":[` + root + `,{"id":2,"parent":0,"depth":1}]}`,
		"later parent":    `{"nodes":[` + root + `,{"id":1,"parent":1,"depth":1}]}`,
		"bad depth":       `{"nodes":[` + root + `,{"id":1,"parent":0,"depth":3}]}`,
		"missing child":   `{"nodes":[` + root + `,{"id":1,"parent":0,"depth":1},{"id":2,"parent":0,"depth":1}]}`,
		"bad status":      `{"nodes":[{"id":0,"parent":-1,"token":-1,"status":"zombie"}]}`,
		"bad quadrant":    `{"nodes":[{"id":0,"parent":-1,"token":-1,"quadrant":"LLLL"}]}`,
		"string float":    `{"nodes":[{"id":0,"parent":-1,"token":-1,"score":"1.5"}]}`,
		"huge float":      `{"nodes":[{"id":0,"parent":-1,"token":-1,"score":1e999}]}`,
		"bad child order": `{"nodes":[{"id":0,"parent":-1,"children":[2,1],"token":-1},{"id":1,"parent":0,"depth":1},{"id":2,"parent":0,"depth":1}]}`,
	} {
		var tr Tree
		if err := json.Unmarshal([]byte(in), &tr); err == nil {
			t.Errorf("%s: Unmarshal accepted %s", name, in)
		}
	}
	// A failed decode leaves the tree as it was.
	tr, _ := sampleTree(t)
	before := nodesOf(tr)
	if err := json.Unmarshal([]byte(`{"nodes":[]}`), tr); err == nil || !reflect.DeepEqual(nodesOf(tr), before) {
		t.Errorf("failed Unmarshal changed the tree (err %v)", err)
	}
}

// FuzzUnmarshalJSON checks that no input panics and that every accepted
// tree encodes to JSON that decodes to the same tree.
func FuzzUnmarshalJSON(f *testing.F) {
	tr, _ := sampleTree(f)
	b, err := json.Marshal(tr)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"nodes":[{"id":0,"parent":-1,"token":-1}]}`))
	f.Add([]byte(`{"prompt_tokens":[1],"nodes":[{"id":0,"parent":-1,"token":-1,"children":[1]},{"id":1,"parent":0,"depth":1,"text_bytes":"/w==","score":"NaN"}]}`))
	f.Add([]byte(`{"nodes":[{"id":0,"parent":-1,"token":-1,"children":[1,1]},{"id":1,"parent":0,"depth":1}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var tr Tree
		if err := json.Unmarshal(in, &tr); err != nil {
			return
		}
		b1, err := json.Marshal(&tr)
		if err != nil {
			t.Fatalf("accepted tree does not encode: %v", err)
		}
		var again Tree
		if err := json.Unmarshal(b1, &again); err != nil {
			t.Fatalf("re-decoding failed: %v\n%s", err, b1)
		}
		b2, err := json.Marshal(&again)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("encoding is not stable (%v):\n%s\n%s", err, b1, b2)
		}
	})
}

func TestNodeJSON(t *testing.T) {
	tr, ids := sampleTree(t)
	n := *tr.Node(ids["a"])
	n.Text = "\xff"
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"cum_logprob":`)) || !bytes.Contains(b, []byte(`"text_bytes":"/w=="`)) {
		t.Errorf("node JSON = %s", b)
	}
	var got Node
	if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, n) {
		t.Errorf("node round trip: %v\n got %+v\nwant %+v", err, got, n)
	}
	if err := json.Unmarshal([]byte(`{"action":"jump"}`), &got); err == nil {
		t.Error("unknown action accepted")
	}
}
