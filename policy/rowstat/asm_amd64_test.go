//go:build amd64 && !purego

package rowstat

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestAsmConventions checks the generated assembly: every function that
// uses vector registers ends with VZEROUPPER, and the AVX2 functions use
// only VEX-encodable registers (an X16-X31 register would silently need
// AVX-512).
func TestAsmConventions(t *testing.T) {
	high := regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`)
	wide := regexp.MustCompile(`\b[YZ][0-9]+\b`)
	src, err := os.ReadFile("rowstat_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var body []string
	check := func() {
		if name == "" {
			return
		}
		vec, zeroed := false, false
		for _, l := range body {
			if strings.Contains(l, "VZEROUPPER") {
				zeroed = true
			}
			if wide.MatchString(l) {
				vec = true
			}
			if strings.HasPrefix(strings.TrimSpace(l), "RET") && vec && !zeroed {
				t.Errorf("%s: RET without VZEROUPPER", name)
			}
			if strings.HasSuffix(name, "AVX2(SB),") && high.MatchString(l) {
				t.Errorf("%s uses an AVX-512 register: %s", name, strings.TrimSpace(l))
			}
		}
	}
	for _, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "TEXT ") {
			check()
			name, body = strings.Fields(l)[1], nil
			continue
		}
		body = append(body, l)
	}
	check()
}
