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

// TestQ8TileLoops checks the Q8_0 tiles' prefetching copy of the loops
// and their loop over tiles: a call with prefetch, or one doing two tiles,
// computes what plain one-tile calls do, bit for bit.
func TestQ8TileLoops(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const rows = 64
	type kernel struct {
		name string
		tile q8TileFunc
		nr   int
	}
	var ks []kernel
	if hasVNNI {
		for nr := 1; nr <= q8VNNI.nr; nr++ {
			ks = append(ks, kernel{"VNNI 1 panel", q8VNNI.t1[nr-1], nr}, kernel{"VNNI 2 panels", q8VNNI.t2[nr-1], nr})
		}
		for nr := 1; nr <= len(q8VNNI.t4); nr++ {
			ks = append(ks, kernel{"VNNI 4 panels", q8VNNI.t4[nr-1], nr})
		}
	}
	if hasAVX2 {
		for nr := 1; nr <= q8AVX2.nr; nr++ {
			ks = append(ks, kernel{"AVX2 1 panel", q8AVX2.t1[nr-1], nr})
		}
	}
	for _, cols := range testColsQ8 {
		m, err := QuantizeQ8(rows, cols, randVec(r, rows*cols))
		if err != nil {
			t.Fatal(err)
		}
		nb, rb, ldw := cols/Q8BlockSize, q8XBytes(cols), m.q8Stride
		xq := make([]byte, 2*q8VNNI.nr*rb)
		quantizeQ8Rows(xq, randVec(r, 2*q8VNNI.nr*cols), 2*q8VNNI.nr, cols)
		for _, k := range ks {
			call := func(out []float32, j, pf, pfs, nt int) {
				k.tile(&m.q8q[0], ldw, &xq[j*rb], rb, nb, &out[j*rows], rows, pf, pfs, nt)
			}
			want := make([]float32, 2*k.nr*rows)
			call(want, 0, 0, 0, 1)
			call(want, k.nr, 0, 0, 1)
			pf := make([]float32, len(want))
			call(pf, 0, 2*ldw, 37, 1)
			call(pf, k.nr, 2*ldw, 37, 1)
			two := make([]float32, len(want))
			call(two, 0, 2*ldw, 37, 2)
			for i := range want {
				if pf[i] != want[i] || two[i] != want[i] {
					t.Fatalf("cols %d, %s x %d: out[%d] = %g with prefetch, %g in a two-tile call, %g plain",
						cols, k.name, k.nr, i, pf[i], two[i], want[i])
				}
			}
		}
	}
}

// TestQ8Plan checks the split of activation rows among tiles: every row
// once, as few tiles as the widest allows, widths differing by at most one.
func TestQ8Plan(t *testing.T) {
	for _, k := range []*q8Kernels{&q8VNNI, &q8AVX2} {
		for n := 1; n <= 40; n++ {
			runs := k.plan(nil, 3, 3+n)
			b, tiles, lo, hi := 3, 0, k.nr, 0
			for _, r := range runs {
				if r.b != b || r.nt < 1 || r.nr < 1 || r.nr > k.nr {
					t.Fatalf("nr %d, n=%d: bad runs %v", k.nr, n, runs)
				}
				b += r.nr * r.nt
				tiles += r.nt
				lo, hi = min(lo, r.nr), max(hi, r.nr)
			}
			if b != 3+n || tiles != (n+k.nr-1)/k.nr || hi-lo > 1 {
				t.Fatalf("nr %d, n=%d: runs %v", k.nr, n, runs)
			}
		}
	}
}
