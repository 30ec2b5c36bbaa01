package stopstr

import (
	"strings"
	"testing"
)

func TestFilter(t *testing.T) {
	var out strings.Builder
	stopped := 0
	f := &Filter{Stops: []string{"\n\n", "END"}, Emit: func(s string) { out.WriteString(s) }, OnStop: func() { stopped++ }}
	for _, piece := range []string{"Hello", " wor", "ld\n", "\nmore", "END"} {
		f.Write(piece)
	}
	f.Flush()
	if out.String() != "Hello world" || stopped != 1 || f.Text() != "Hello world" {
		t.Errorf("output %q, %d stops", out.String(), stopped)
	}
	// A stop string split over pieces, and text held back until it cannot
	// begin one.
	out.Reset()
	f = &Filter{Stops: []string{"ENDS"}, Emit: func(s string) { out.WriteString(s) }, OnStop: func() {}}
	f.Write("abcEN")
	if out.String() != "ab" {
		t.Errorf("held back: %q", out.String())
	}
	f.Write("Dx")
	f.Flush()
	if out.String() != "abcENDx" || f.Cut() {
		t.Errorf("no stop: %q", out.String())
	}
	// No stop strings: everything passes at once.
	out.Reset()
	f = &Filter{Emit: func(s string) { out.WriteString(s) }}
	f.Write("a")
	if out.String() != "a" {
		t.Errorf("no stops: %q", out.String())
	}
}
