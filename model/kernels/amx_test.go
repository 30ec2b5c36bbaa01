//go:build amd64 && linux && !purego

package kernels

import (
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"sync"
	"testing"
	"time"
)

// q6k16Case is random q6k16 units (any bytes: the scales' int8 and the
// values' six bits and top pairs, with finite float16 d) and sixteen
// rows of Q8_K activations quantized from random floats.
type q6k16Case struct {
	w, x       []byte
	nb, npairs int
}

func newQ6K16Case(r *rand.Rand, nb, npairs int, fill func(u []byte)) q6k16Case {
	c := q6k16Case{w: make([]byte, npairs*nb*q6k16Unit), x: make([]byte, k16NX*nb*q8kBlockBytes), nb: nb, npairs: npairs}
	for i := range c.w {
		c.w[i] = byte(r.Uint32())
	}
	for u := 0; u < npairs*nb; u++ {
		unit := c.w[u*q6k16Unit:][:q6k16Unit]
		for l := range 16 {
			binary.LittleEndian.PutUint16(unit[2*l:], FloatToHalf(float32(r.NormFloat64())))
		}
		if fill != nil {
			fill(unit)
		}
	}
	for i := range k16NX {
		quantizeQ8KRow(c.x[i*nb*q8kBlockBytes:][:nb*q8kBlockBytes], randVec(r, nb*QKBlockSize))
	}
	return c
}

// run computes the case with tile into a fresh output.
func (c q6k16Case) run(tile kTileFunc) []float32 {
	rows := 16 * c.npairs
	out := make([]float32, k16NX*rows)
	tile(&c.w[0], &c.x[0], c.nb*q8kBlockBytes, c.nb, &out[0], rows, c.npairs)
	return out
}

func requireAMX(t *testing.T) {
	t.Helper()
	if !hasAMX {
		t.Skip("no AMX here (the CPU lacks AMX-INT8, VBMI or GFNI, the OS did not permit the tiles, or ENTROPIX_NO_AMX is set)")
	}
}

// TestQ6KAMXMatchesGFNI checks the AMX tile against the GFNI full tile
// bit for bit: random units, and the extremes of the products (scale
// -128 with values 0 and 63, scale 127) where the planes' high bytes are
// largest.
func TestQ6KAMXMatchesGFNI(t *testing.T) {
	requireAMX(t)
	r := rand.New(rand.NewPCG(31, 1))
	extremes := []struct {
		name string
		fill func(u []byte)
	}{
		{"random", nil},
		{"scale -128, value 0", func(u []byte) {
			for i := q6k16Scales; i < q6k16Quants; i++ {
				u[i] = 0x80
			}
			clear(u[q6k16Quants:])
		}},
		{"scale -128, value 63", func(u []byte) {
			for i := q6k16Scales; i < q6k16Quants; i++ {
				u[i] = 0x80
			}
			for i := q6k16Quants; i < len(u); i++ {
				u[i] = 0xFF
			}
		}},
		{"scale 127, value 0", func(u []byte) {
			for i := q6k16Scales; i < q6k16Quants; i++ {
				u[i] = 0x7F
			}
			clear(u[q6k16Quants:])
		}},
	}
	for _, e := range extremes {
		for _, shape := range [][2]int{{1, 1}, {2, 1}, {1, 3}, {5, 2}, {8, 3}} {
			c := newQ6K16Case(r, shape[0], shape[1], e.fill)
			want, got := c.run(q6k16Tile16GFNI), c.run(q6k16Tile16AMX)
			if !slices.Equal(want, got) {
				t.Errorf("%s, nb %d, %d pairs: the AMX tile differs from the GFNI one", e.name, shape[0], shape[1])
			}
		}
	}
}

// TestQ6KAMXUnderSignals runs the AMX tile on several goroutines while
// the CPU profiler interrupts the threads with signals (and the garbage
// collector runs): the kernel saves the tiles in each signal's frame and
// restores them, so every result must still be the reference's.
func TestQ6KAMXUnderSignals(t *testing.T) {
	requireAMX(t)
	if testing.Short() {
		t.Skip("short")
	}
	r := rand.New(rand.NewPCG(31, 2))
	c := newQ6K16Case(r, 8, 24, nil)
	want := c.run(q6k16Tile16GFNI)
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		t.Skip("no CPU profiler:", err)
	}
	defer pprof.StopCPUProfile()
	deadline := time.Now().Add(300 * time.Millisecond)
	var wg sync.WaitGroup
	var mu sync.Mutex
	runs, bad := 0, 0
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				ok := slices.Equal(c.run(q6k16Tile16AMX), want)
				mu.Lock()
				runs++
				if !ok {
					bad++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(deadline) {
			_ = make([]byte, 1<<20)
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	if bad > 0 {
		t.Errorf("%d of %d runs under signals differ from the reference", bad, runs)
	}
	if math.IsNaN(float64(want[0])) {
		t.Error("NaN reference")
	}
}
