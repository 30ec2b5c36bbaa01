package policy

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Answer extraction: what a completion answers, for the searches' votes
// on the answer (self-consistency, CoT-decoding, beam-adaptive) and for
// scoring math tasks (bench).

// ExtractAnswer finds the final answer of a math completion. The text is
// first cut at "Question:" (a model that goes on to invent the next
// problem); then the answer is the first number after the last "####" or
// "answer is", when the completion has one, and otherwise the last number
// of the text. Numbers are returned as LastNumber returns them.
func ExtractAnswer(completion string) (string, bool) {
	s := completion
	if i := strings.Index(s, "Question:"); i >= 0 {
		s = s[:i]
	}
	if n, ok := MarkedAnswer(s); ok {
		return n, true
	}
	return LastNumber(s)
}

// MarkedAnswer is ExtractAnswer without its fallback: the first number
// after the last "####" or "answer is", and false when the completion has
// neither. A text that does not mark its answer has none to vote with.
func MarkedAnswer(completion string) (string, bool) {
	s := completion
	if i := strings.Index(s, "Question:"); i >= 0 {
		s = s[:i]
	}
	lower := strings.ToLower(s)
	for _, marker := range []string{"####", "answer is"} {
		if i := strings.LastIndex(lower, marker); i >= 0 {
			if n, ok := FirstNumber(lower[i+len(marker):]); ok {
				return n, true
			}
		}
	}
	return "", false
}

// LastNumber returns the last number in s, normalised: thousands commas
// and a dollar sign removed, a minus sign kept ("-$1,250.50" gives
// "-1250.50"). A comma belongs to a number only when exactly three digits
// follow it ("1, 2" is two numbers); a minus sign only when it does not
// follow a letter or digit ("3-4" is 3 and 4, "x = -4" is -4).
func LastNumber(s string) (string, bool) {
	last, ok := "", false
	scanNumbers(s, func(n string) bool {
		last, ok = n, true
		return true
	})
	return last, ok
}

// FirstNumber returns the first number in s, as LastNumber would.
func FirstNumber(s string) (string, bool) {
	first, ok := "", false
	scanNumbers(s, func(n string) bool {
		first, ok = n, true
		return false
	})
	return first, ok
}

// scanNumbers calls yield with each number of s in order, until yield
// returns false.
func scanNumbers(s string, yield func(string) bool) {
	isDigit := func(i int) bool { return i >= 0 && i < len(s) && s[i] >= '0' && s[i] <= '9' }
	var b []byte
	for i := 0; i < len(s); {
		if !isDigit(i) {
			i++
			continue
		}
		b = b[:0]
		if negativeBefore(s, i) {
			b = append(b, '-')
		}
		// Integer part, with thousands commas.
		for {
			for isDigit(i) {
				b = append(b, s[i])
				i++
			}
			if i < len(s) && s[i] == ',' && isDigit(i+1) && isDigit(i+2) && isDigit(i+3) && !isDigit(i+4) {
				i++
				continue
			}
			break
		}
		// Fraction.
		if i < len(s) && s[i] == '.' && isDigit(i+1) {
			b = append(b, '.')
			for i++; isDigit(i); i++ {
				b = append(b, s[i])
			}
		}
		if !yield(string(b)) {
			return
		}
	}
}

// negativeBefore reports whether the number starting at s[i] has a minus
// sign: '-' or '−' (U+2212) just before it, or before a '$' just before
// it, not itself preceded by a letter or digit.
func negativeBefore(s string, i int) bool {
	j := i
	if j > 0 && s[j-1] == '$' {
		j--
	}
	r, size := utf8.DecodeLastRuneInString(s[:j])
	if r != '-' && r != '−' {
		return false
	}
	prev, _ := utf8.DecodeLastRuneInString(s[:j-size])
	return j-size == 0 || !isWordRune(prev)
}

// isWordRune reports whether r is a letter or a digit.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
