package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/tree"
)

// TestStopStringsEveryMode checks, in every mode, that a stop string ends
// the branches that generate it and that the result's text, tokens, tree
// and stream agree: Text is the committed text before the stop string,
// Tokens the committed path's tokens that lie wholly before it, the path
// ends at the token that completes it, and the stream passes Text exactly.
func TestStopStringsEveryMode(t *testing.T) {
	m := loadStories(t)
	tok := m.Tokenizer
	const prompt = "Once upon a time"
	for _, mode := range Modes() {
		t.Run(mode.String(), func(t *testing.T) {
			b := Budget{MaxTokens: 48}
			free := runSearch(t, newEngine(t, m, WithMode(mode), WithSeed(3)), prompt, b)
			// A stop string across a token boundary in the middle of the
			// free text.
			ids := tok.Encode(prompt, tok.AddBOS())
			d := tok.NewDecoder(ids[len(ids)-1])
			var ends []int
			n := 0
			for _, id := range free.Tokens {
				n += len(d.Next(id))
				ends = append(ends, n)
			}
			if len(ends) < 8 {
				t.Skipf("%d tokens: too short a text", len(ends))
			}
			k := ends[len(ends)/2]
			stop := free.Text[k-2 : k+2]
			var streamed strings.Builder
			e := newEngine(t, m, WithMode(mode), WithSeed(3), WithStopStrings("no such text", stop),
				WithStream(func(s string) { streamed.WriteString(s) }))
			res := runSearch(t, e, prompt, b)
			if got := streamed.String(); got != res.Text {
				t.Errorf("streamed %q, Text %q", got, res.Text)
			}
			if strings.Contains(res.Text, stop) {
				t.Errorf("Text %q holds the stop string %q", res.Text, stop)
			}
			if res.Tree.Node(committedLeaf(res.Tree)).Reason == "stop" && res.Stopped != "stop" {
				t.Errorf("the committed path ended at the stop string; stopped %q", res.Stopped)
			}
			switch mode {
			case Greedy, Sample, Entropix: // the same path, cut
				if want := free.Text[:strings.Index(free.Text, stop)]; res.Text != want || res.Stopped != "stop" {
					t.Errorf("Text %q, stopped %q; want %q, stop", res.Text, res.Stopped, want)
				}
			}
			stops := 0
			for id, nd := range res.Tree.All() {
				if id == tree.Root {
					continue
				}
				path := pathTokens(res.Tree, id)
				text := decodeAfter(tok, ids[len(ids)-1], path)
				before := decodeAfter(tok, ids[len(ids)-1], path[:len(path)-1])
				if nd.Reason == "stop" {
					stops++
					if nd.Status != tree.Finished || !nd.IsLeaf() || !strings.Contains(text, stop) || strings.Contains(before, stop) {
						t.Errorf("node %d (reason stop, status %v, leaf %v): text %q, before %q", id, nd.Status, nd.IsLeaf(), text, before)
					}
				} else if strings.Contains(text, stop) {
					t.Errorf("node %d (%s) goes on past the stop string: %q", id, nd.Reason, text)
				}
			}
			if stops == 0 {
				t.Errorf("no branch met the stop string %q", stop)
			}
			t.Logf("stop %q: stopped %q, %d stop nodes, text %q", stop, res.Stopped, stops, res.Text)
			if res.Stopped != "stop" {
				return
			}
			// The committed path: Tokens, then the tokens that spell the
			// stop string, the last finished with reason "stop".
			var path []int
			last := tree.Root
			for id, nd := range res.Tree.All() {
				if id != tree.Root && nd.Committed {
					path = append(path, nd.Token)
					last = id
				}
			}
			if res.Tree.Node(last).Reason != "stop" || len(path) <= len(res.Tokens) || !slicesEqual(path[:len(res.Tokens)], res.Tokens) {
				t.Fatalf("committed path %v (last reason %q), Tokens %v", path, res.Tree.Node(last).Reason, res.Tokens)
			}
			full := decodeAfter(tok, ids[len(ids)-1], path)
			if i := strings.Index(full, stop); i != len(res.Text) || full[:i] != res.Text {
				t.Errorf("path text %q: stop string at %d, Text %q", full, i, res.Text)
			}
			// Tokens are those wholly before the stop string, and all of them.
			head := decodeAfter(tok, ids[len(ids)-1], res.Tokens)
			next := decodeAfter(tok, ids[len(ids)-1], path[:len(res.Tokens)+1])
			if !strings.HasPrefix(res.Text, head) || len(next) <= len(res.Text) {
				t.Errorf("Tokens decode to %q, with the next token %q; Text %q", head, next, res.Text)
			}
			if res.Stats.Generated != len(res.Tokens) {
				t.Errorf("Generated %d, %d tokens", res.Stats.Generated, len(res.Tokens))
			}
		})
	}
}

// TestStopStringFirstStartWins checks that of two stop strings completed
// by the same token, the one starting first cuts.
func TestStopStringFirstStartWins(t *testing.T) {
	m := loadStories(t)
	b := Budget{MaxTokens: 48}
	free := runSearch(t, newEngine(t, m, WithMode(Greedy)), "Once upon a time", b)
	i := len(free.Text) / 2
	long, short := free.Text[i:i+4], free.Text[i+2:i+4] // both end at i+4
	if strings.Index(free.Text, short) < i+2 || strings.Index(free.Text, long) < i {
		t.Skip("a stop string appears earlier")
	}
	var chunks []string
	e := newEngine(t, m, WithMode(Greedy), WithStopStrings(short, long), WithStream(func(s string) { chunks = append(chunks, s) }))
	res := runSearch(t, e, "Once upon a time", b)
	if want := free.Text[:i]; res.Text != want || res.Stopped != "stop" {
		t.Errorf("Text %q, stopped %q; want %q", res.Text, res.Stopped, want)
	}
	if got := strings.Join(chunks, ""); got != res.Text {
		t.Errorf("streamed %q", got)
	}
}

// committedLeaf is the last node of the committed path.
func committedLeaf(tr *tree.Tree) tree.ID {
	last := tree.Root
	for id, nd := range tr.All() {
		if nd.Committed {
			last = id
		}
	}
	return last
}

func pathTokens(tr *tree.Tree, id tree.ID) []int {
	var toks []int
	for _, n := range tr.Path(id)[1:] {
		toks = append(toks, tr.Node(n).Token)
	}
	return toks
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestEmptyStopString is an error.
func TestEmptyStopString(t *testing.T) {
	m := loadStories(t)
	if _, err := New(m, WithStopStrings("x", "")); err == nil {
		t.Error("an empty stop string was accepted")
	}
	e := newEngine(t, m)
	if _, err := e.SearchWith(context.Background(), "Once", Budget{MaxTokens: 4}, WithStopStrings("")); err == nil {
		t.Error("an empty stop string was accepted per search")
	}
}

// FuzzStopStream: however the committed text arrives in pieces, the
// stream passes exactly the text before the stop string that ends it (all
// of it when none appears). As in a search, the text ends where the
// first stop string to be completed ends.
func FuzzStopStream(f *testing.F) {
	f.Add("Once upon a time\n\nQuestion: x", "\n\nQuestion:", "ime", uint8(3))
	f.Add("aaab", "aab", "b", uint8(1))
	f.Add("héllo wörld", "ö", "lo w", uint8(2))
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, step uint8) {
		var stops []string
		for _, st := range []string{stop1, stop2} {
			if st != "" {
				stops = append(stops, st)
			}
		}
		if len(stops) == 0 {
			return
		}
		end := len(text) // where the first stop string to be completed ends
		for _, st := range stops {
			if i := strings.Index(text, st); i >= 0 {
				end = min(end, i+len(st))
			}
		}
		text = text[:end]
		var got strings.Builder
		s := &search{opts: &Options{StopStrings: stops, Stream: func(p string) { got.WriteString(p) }}}
		n := int(step%8) + 1
		for i := 0; i < len(text); i += n {
			s.send(text[i:min(i+n, len(text))])
		}
		s.endStream()
		want := text
		if at := firstStop(text, stops); at >= 0 {
			want = text[:at]
		}
		if got.String() != want {
			t.Fatalf("text %q, stops %q, pieces of %d: streamed %q, want %q", text, stops, n, got.String(), want)
		}
	})
}
