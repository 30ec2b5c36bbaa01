//go:build amd64 && !purego

package kernels

import (
	"math/rand/v2"
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
	for _, file := range []string{"matmul_amd64.s", "vec_amd64.s"} {
		src, err := os.ReadFile(file)
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
				if regexp.MustCompile(`\b[YZ][0-9]+\b`).MatchString(l) {
					vec = true
				}
				if strings.HasPrefix(strings.TrimSpace(l), "RET") && vec && !zeroed {
					t.Errorf("%s: %s: RET without VZEROUPPER", file, name)
				}
				if strings.HasSuffix(name, "AVX2(SB),") && high.MatchString(l) {
					t.Errorf("%s: %s uses an AVX-512 register: %s", file, name, strings.TrimSpace(l))
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
}

// TestQ8TilePrefetch checks that the VNNI tiles' prefetching copy of the
// loops computes what the plain copy does, bit for bit.
func TestQ8TilePrefetch(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX-512 VNNI")
	}
	r := rand.New(rand.NewPCG(3, 4))
	const rows = 16
	for _, cols := range testColsQ8 {
		m, err := QuantizeQ8(rows, cols, randVec(r, rows*cols))
		if err != nil {
			t.Fatal(err)
		}
		g := m.q8g
		rb := g.xBytes()
		xq := make([]byte, 3*rb)
		quantizeQ8Rows(xq, randVec(r, 3*cols), 3, cols)
		for nr := 1; nr <= 3; nr++ {
			want := make([]float32, nr*rows)
			got := make([]float32, nr*rows)
			tile := q8VNNI.t4[nr-1]
			tile(&m.q8q[0], m.q8Stride, &m.q8d[0], m.q8Blocks, &xq[0], rb, g.n16, g.n8, g.chunks(), &want[0], rows, 0, 0)
			tile(&m.q8q[0], m.q8Stride, &m.q8d[0], m.q8Blocks, &xq[0], rb, g.n16, g.n8, g.chunks(), &got[0], rows, 8*m.q8Stride, 37)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("cols %d, 4x%d tile: out[%d] = %g with prefetch, %g without", cols, nr, i, got[i], want[i])
				}
			}
		}
	}
}
