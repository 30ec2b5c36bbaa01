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

// TestQ8TileLoops checks the VNNI tiles' prefetching copy of the loops
// and their loop over tiles: a call with prefetch, or one doing two tiles,
// computes what plain one-tile calls do, bit for bit.
func TestQ8TileLoops(t *testing.T) {
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
		xq := make([]byte, 6*rb)
		quantizeQ8Rows(xq, randVec(r, 6*cols), 6, cols)
		for mr, k := range map[int][]q8TileFunc{4: q8VNNI.t4, 1: q8VNNI.t1} {
			for nr := 1; nr <= 3; nr++ {
				tile := k[nr-1]
				want := make([]float32, 2*nr*rows)
				tile(&m.q8q[0], m.q8Stride, &m.q8d[0], m.q8Blocks, &xq[0], rb, g.n16, g.n8, g.chunks(), &want[0], rows, 0, 0, 1)
				tile(&m.q8q[0], m.q8Stride, &m.q8d[0], m.q8Blocks, &xq[nr*rb], rb, g.n16, g.n8, g.chunks(), &want[nr*rows], rows, 0, 0, 1)
				pf := make([]float32, 2*nr*rows)
				tile(&m.q8q[0], m.q8Stride, &m.q8d[0], m.q8Blocks, &xq[0], rb, g.n16, g.n8, g.chunks(), &pf[0], rows, 8*m.q8Stride, 37, 1)
				tile(&m.q8q[0], m.q8Stride, &m.q8d[0], m.q8Blocks, &xq[nr*rb], rb, g.n16, g.n8, g.chunks(), &pf[nr*rows], rows, 8*m.q8Stride, 37, 1)
				two := make([]float32, 2*nr*rows)
				tile(&m.q8q[0], m.q8Stride, &m.q8d[0], m.q8Blocks, &xq[0], rb, g.n16, g.n8, g.chunks(), &two[0], rows, 8*m.q8Stride, 37, 2)
				for i := range want {
					if pf[i] != want[i] || two[i] != want[i] {
						t.Fatalf("cols %d, %dx%d tile: out[%d] = %g with prefetch, %g in a two-tile call, %g plain",
							cols, mr, nr, i, pf[i], two[i], want[i])
					}
				}
			}
		}
	}
}
