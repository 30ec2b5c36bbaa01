package policy

import "testing"

func TestLastNumber(t *testing.T) {
	for _, c := range []struct {
		s, want string
		ok      bool
	}{
		{"", "", false},
		{"no numbers here", "", false},
		{"18", "18", true},
		{"She makes $18 every day.", "18", true},
		{"9 * 2 = 18.", "18", true},
		{"16 - 3 - 4 = 9 eggs", "9", true},
		{"a profit of $70,000.", "70000", true},
		{"1,234,567 stars", "1234567", true},
		{"1, 2, 3", "3", true},
		{"12,34", "34", true},        // not a thousands group
		{"1,2345", "2345", true},     // neither
		{"1,234,5678", "5678", true}, // the last group is not three digits
		{"x = -4", "-4", true},
		{"it is -$5", "-5", true},
		{"it is $-5", "-5", true},
		{"3-4", "4", true},
		{"pages 10-12", "12", true},
		{"temperature −7 degrees", "-7", true},
		{"pi is 3.14159", "3.14159", true},
		{"costs $2.50.", "2.50", true},
		{"version 1.2.3", "3", true},
		{"at 50% off", "50", true},
		{"0.5 and 007", "007", true},
	} {
		got, ok := LastNumber(c.s)
		if got != c.want || ok != c.ok {
			t.Errorf("LastNumber(%q) = %q, %v; want %q, %v", c.s, got, ok, c.want, c.ok)
		}
	}
}

func TestExtractAnswer(t *testing.T) {
	for _, c := range []struct {
		s, want string
		ok      bool
	}{
		{"She sells 9 eggs for $2 each, so 9 * 2 = 18.", "18", true},
		{"9 * 2 = 18\n#### 18", "18", true},
		{"#### 1,000 and then 7 more", "1000", true},
		{"So the answer is 42. Next, 7 apples.", "42", true},
		{"The Answer Is $3.", "3", true},
		{"It is 5.\n\nQuestion: What is 6 + 1?\nAnswer: 7", "5", true},
		{"the answer is unclear, maybe 12", "12", true}, // no number after the marker: the last one
		{"I don't know.", "", false},
	} {
		got, ok := ExtractAnswer(c.s)
		if got != c.want || ok != c.ok {
			t.Errorf("ExtractAnswer(%q) = %q, %v; want %q, %v", c.s, got, ok, c.want, c.ok)
		}
	}
}
