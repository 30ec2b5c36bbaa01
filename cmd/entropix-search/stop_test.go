package main

import (
	"strings"
	"testing"
)

func TestStopFilter(t *testing.T) {
	var out strings.Builder
	stopped := 0
	f := &stopFilter{stops: []string{"\n\n", "END"}, emit: func(s string) { out.WriteString(s) }, onStop: func() { stopped++ }}
	for _, piece := range []string{"Hello", " wor", "ld\n", "\nmore", "END"} {
		f.write(piece)
	}
	f.flush()
	if out.String() != "Hello world" || stopped != 1 || f.text.String() != "Hello world" {
		t.Errorf("output %q, %d stops", out.String(), stopped)
	}
	// A stop string split over pieces, and text held back until it cannot
	// begin one.
	out.Reset()
	f = &stopFilter{stops: []string{"ENDS"}, emit: func(s string) { out.WriteString(s) }, onStop: func() {}}
	f.write("abcEN")
	if out.String() != "ab" {
		t.Errorf("held back: %q", out.String())
	}
	f.write("Dx")
	f.flush()
	if out.String() != "abcENDx" || f.cut {
		t.Errorf("no stop: %q", out.String())
	}
	// No stop strings: everything passes at once.
	out.Reset()
	f = &stopFilter{emit: func(s string) { out.WriteString(s) }}
	f.write("a")
	if out.String() != "a" {
		t.Errorf("no stops: %q", out.String())
	}
}
