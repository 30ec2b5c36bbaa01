package main

import (
	"errors"
	"strings"
)

// errStopString is the cause of a search ended by a -r/--stop string: a
// normal end, not an interrupt.
var errStopString = errors.New("stop string")

// stopFilter passes generated text on until one of its stop strings
// appears, which it cuts (the stop string and what follows are not
// output, as OpenAI's stop sequences). It holds back the last bytes that
// could begin a stop string until they cannot.
type stopFilter struct {
	stops  []string
	emit   func(string)
	onStop func() // called once, when a stop string appears
	held   string
	cut    bool
	// text is everything passed on, to cut the result's text alike.
	text strings.Builder
}

func (f *stopFilter) longest() int {
	n := 0
	for _, s := range f.stops {
		n = max(n, len(s))
	}
	return n
}

func (f *stopFilter) write(s string) {
	if f.cut {
		return
	}
	if len(f.stops) == 0 {
		f.pass(s)
		return
	}
	buf := f.held + s
	at := -1
	for _, stop := range f.stops {
		if i := strings.Index(buf, stop); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at >= 0 {
		f.pass(buf[:at])
		f.held, f.cut = "", true
		f.onStop()
		return
	}
	keep := min(f.longest()-1, len(buf))
	f.pass(buf[:len(buf)-keep])
	f.held = buf[len(buf)-keep:]
}

// flush passes on what is held back (the text has ended).
func (f *stopFilter) flush() {
	if !f.cut {
		f.pass(f.held)
	}
	f.held = ""
}

func (f *stopFilter) pass(s string) {
	if s != "" {
		f.text.WriteString(s)
		f.emit(s)
	}
}
