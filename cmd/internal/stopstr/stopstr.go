// Package stopstr cuts generated text at stop strings (OpenAI's stop
// sequences, llama.cpp's -r), holding back what could begin one.
package stopstr

import (
	"errors"
	"strings"
)

// ErrStop is the cause of a search ended by a stop string: a normal end,
// not an interrupt.
var ErrStop = errors.New("stop string")

// Filter passes generated text on until one of its stop strings appears,
// which it cuts (the stop string and what follows are not output, as
// OpenAI's stop sequences). It holds back the last bytes that could begin
// a stop string until they cannot.
type Filter struct {
	Stops  []string
	Emit   func(string)
	OnStop func() // called once, when a stop string appears (may be nil)
	held   string
	cut    bool
	// text is everything passed on, to cut the result's text alike.
	text strings.Builder
}

// Cut reports whether a stop string appeared.
func (f *Filter) Cut() bool { return f.cut }

// Text is everything passed on.
func (f *Filter) Text() string { return f.text.String() }

func (f *Filter) longest() int {
	n := 0
	for _, s := range f.Stops {
		n = max(n, len(s))
	}
	return n
}

// Write passes s on, up to a stop string.
func (f *Filter) Write(s string) {
	if f.cut {
		return
	}
	if len(f.Stops) == 0 {
		f.pass(s)
		return
	}
	buf := f.held + s
	at := -1
	for _, stop := range f.Stops {
		if i := strings.Index(buf, stop); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at >= 0 {
		f.pass(buf[:at])
		f.held, f.cut = "", true
		if f.OnStop != nil {
			f.OnStop()
		}
		return
	}
	keep := min(f.longest()-1, len(buf))
	f.pass(buf[:len(buf)-keep])
	f.held = buf[len(buf)-keep:]
}

// Flush passes on what is held back (the text has ended).
func (f *Filter) Flush() {
	if !f.cut {
		f.pass(f.held)
	}
	f.held = ""
}

func (f *Filter) pass(s string) {
	if s != "" {
		f.text.WriteString(s)
		f.Emit(s)
	}
}
