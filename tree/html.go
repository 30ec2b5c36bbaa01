package tree

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/entropix-search/entropix-search/policy"
)

//go:embed viewer.html
var viewerHTML string

// HTMLOptions configure WriteHTML.
type HTMLOptions struct {
	// Title is shown at the top of the page.
	Title string
	// Thresholds are drawn on the entropy and varentropy chart.
	Thresholds policy.Thresholds
	// TokenText gives the text of a token id, for the alternatives of
	// Node.Top (nil: they are shown by id).
	TokenText func(id int) string
}

// htmlData is what the page's script reads.
type htmlData struct {
	Title      string            `json:"title"`
	Thresholds policy.Thresholds `json:"thresholds"`
	Tree       *Tree             `json:"tree"`
	// Tokens maps the ids of the nodes' Top alternatives to their text.
	Tokens map[int]string `json:"tokens,omitempty"`
}

// WriteHTML writes the tree as one self-contained HTML page: the tree's
// JSON, the script and the styles are inline, and the page loads nothing
// (its Content-Security-Policy forbids it), so it opens from disk,
// offline. It shows the result's text coloured by quadrant with each
// token's numbers on hover, a strip chart of entropy and varentropy with
// the thresholds and the forks, and the tree: the result's path as a spine,
// runs of single-child nodes on one line, forks that open on a click with
// their branches compared side by side, pan and zoom.
func (t *Tree) WriteHTML(w io.Writer, opt HTMLOptions) error {
	d := htmlData{Title: opt.Title, Thresholds: opt.Thresholds, Tree: t}
	if opt.TokenText != nil {
		d.Tokens = map[int]string{}
		for _, n := range t.All() {
			for _, c := range n.Top {
				d.Tokens[c.Token] = opt.TokenText(c.Token)
			}
		}
	}
	// json.Marshal escapes <, > and &, so no "</script>" can end the
	// data early.
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("tree: html: %w", err)
	}
	title := opt.Title
	if title == "" {
		title = "entropix-search tree"
	}
	page := strings.Replace(viewerHTML, "{{TITLE}}", html.EscapeString(title), 1)
	page = strings.Replace(page, "{{DATA}}", string(b), 1)
	_, err = io.WriteString(w, page)
	return err
}
