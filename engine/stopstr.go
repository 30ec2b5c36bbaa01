package engine

import (
	"strings"

	"github.com/entropix-search/entropix-search/model/tokenizer"
	"github.com/entropix-search/entropix-search/tree"
)

// Stop strings (Options.StopStrings) end a branch inside the search, in
// every mode, as its text is generated: the token whose text completes a
// stop string is the branch's last node, finished with reason "stop", so
// a vote or a selection among branches sees the path cut there. When the
// committed path ends so:
//   - Result.Text is the path's text before the stop string;
//   - Result.Tokens are the path's tokens whose text lies wholly before
//     the stop string (a token that spans the text and the stop string
//     is left out, its part before the stop string being in Text);
//   - the committed tree path is Result.Tokens followed by the tokens that
//     spell the stop string (as an end-of-text token ends a path without
//     being in Result.Tokens);
//   - Result.Stopped is "stop";
//   - the stream (Options.Stream) passes Result.Text exactly: it holds
//     back any end of the committed text that could begin a stop string
//     until it cannot, and never passes the stop string.
// The text is matched as decoded (Result.Text's bytes), across token
// boundaries; when several stop strings appear at once, the one starting
// first cuts.

// stopScan is a tree node's place in the stop-string scan of its path.
type stopScan struct {
	dec *tokenizer.Decoder // the path's decoder after the node's token
	// tail is the end of the path's text: at most the longest stop
	// string less one byte, enough to find one that the next token
	// completes.
	tail string
	// over, at a node whose token completed a stop string, is the bytes
	// of the path's text from the stop string's start to the node's end.
	over int
}

// scanStop scans the text that token tok, just added as node id below
// parent, adds to the path, and reports whether it completes a stop
// string.
func (s *search) scanStop(parent, id tree.ID, tok int) bool {
	stops := s.opts.StopStrings
	if len(stops) == 0 {
		return false
	}
	if len(s.stopScans) == 0 { // the root
		s.stopScans = append(s.stopScans, stopScan{dec: s.tok.NewDecoder(s.prompt[len(s.prompt)-1])})
	}
	for len(s.stopScans) <= int(id) {
		s.stopScans = append(s.stopScans, stopScan{})
	}
	p := &s.stopScans[parent]
	dec := p.dec.Clone()
	text := p.tail + dec.Next(tok)
	at := firstStop(text, stops)
	keep := min(len(text), longestStop(stops)-1)
	s.stopScans[id] = stopScan{dec: dec, tail: strings.Clone(text[len(text)-keep:])}
	if at < 0 {
		return false
	}
	s.stopScans[id].over = len(text) - at
	return true
}

// firstStop returns where the first of stops to start in text starts, or
// -1.
func firstStop(text string, stops []string) int {
	at := -1
	for _, st := range stops {
		if i := strings.Index(text, st); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

func longestStop(stops []string) int {
	n := 0
	for _, st := range stops {
		n = max(n, len(st))
	}
	return n
}

// stopPrefix returns the length of the longest end of text that begins a
// stop string (and is not one).
func stopPrefix(text string, stops []string) int {
	best := 0
	for _, st := range stops {
		for n := min(len(st)-1, len(text)); n > best; n-- {
			if strings.HasSuffix(text, st[:n]) {
				best = n
				break
			}
		}
	}
	return best
}

// cutAtStop returns the length of text, the decoded text of path id's
// tokens without the decoder's final flush, before the stop string that
// ended the path, and false when no stop string ended it.
func (s *search) cutAtStop(id tree.ID, text int) (int, bool) {
	if len(s.opts.StopStrings) == 0 || s.t.Node(id).Reason != "stop" || int(id) >= len(s.stopScans) {
		return text, false
	}
	return text - s.stopScans[id].over, true
}

// send passes committed text to the stream, holding back what could begin
// a stop string and nothing from a stop string on.
func (s *search) send(txt string) {
	if s.opts.Stream == nil || txt == "" || s.streamCut {
		return
	}
	s.sent = true
	stops := s.opts.StopStrings
	if len(stops) == 0 {
		s.opts.Stream(txt)
		return
	}
	h := s.held + txt
	if at := firstStop(h, stops); at >= 0 {
		s.held, s.streamCut = "", true
		if at > 0 {
			s.opts.Stream(h[:at])
		}
		return
	}
	n := len(h) - stopPrefix(h, stops)
	if n > 0 {
		s.opts.Stream(h[:n])
	}
	s.held = h[n:]
}

// endStream passes on what the stream held back once the text has ended
// without a stop string.
func (s *search) endStream() {
	if s.held != "" && !s.streamCut && s.opts.Stream != nil {
		s.opts.Stream(s.held)
	}
	s.held = ""
}

// stopCut cuts the result at the stop string that ended its path, if one
// did: Text before it, Tokens those whose text lies wholly before it.
func (s *search) stopCut() (string, bool) {
	if len(s.opts.StopStrings) == 0 || s.t.Node(s.committed).Reason != "stop" {
		return "", false
	}
	d := s.tok.NewDecoder(s.prompt[len(s.prompt)-1])
	var b []byte
	ends := make([]int, len(s.res.Tokens))
	for i, t := range s.res.Tokens {
		b = append(b, d.Next(t)...)
		ends[i] = len(b)
	}
	cut, ok := s.cutAtStop(s.committed, len(b))
	if !ok {
		return "", false
	}
	n := 0
	for n < len(ends) && ends[n] <= cut {
		n++
	}
	s.res.Tokens = s.res.Tokens[:n]
	return string(b[:cut]), true
}
