package kernels

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// vmSize is the process's mapped memory (VmSize of /proc/self/status).
func vmSize(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmSize:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmSize")
	return 0
}

// TestWeightChunksUnmapped maps and drops 6 GiB of weight chunks, a
// quarter of a GiB at a time: the collections forced every gcEveryMapped
// bytes let the cleanups unmap the dead ones, so the process's mapped
// memory stays bounded although its Go heap does not grow.
func TestWeightChunksUnmapped(t *testing.T) {
	if testing.Short() {
		t.Skip("maps 6 GiB over time")
	}
	before := vmSize(t)
	for range 24 {
		c := mapWeightChunk(256 << 20)
		if c == nil {
			t.Skip("no anonymous mapping of 256 MiB")
		}
		c.mem[0], c.mem[len(c.mem)-1] = 1, 1 // touch two pages
	}
	// Cleanups run on a goroutine of their own, after the collection
	// that found their chunks dead: give them time, without collecting
	// here (that is the job of mapWeightChunk's forced collections).
	var grew int64
	for range 100 {
		if grew = vmSize(t) - before; grew <= 3<<30 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("mapped memory grew by %d MiB after dropping 6 GiB of chunks", grew>>20)
}

// A K-quant matrix from a file mapping is moved into weight memory (huge
// pages) and gives bit for bit what the same blocks give in place.
func TestQ4KMatMapped(t *testing.T) {
	rows, cols := 4096, 2048 // 4.5 MiB of blocks: more than weightSmall
	w := randVec(rand.New(rand.NewPCG(11, 12)), rows*cols)
	raw, err := EncodeQ4K(rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "blocks")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapped, err := unix.Mmap(int(f.Fd()), 0, len(raw), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Skip("no mmap:", err)
	}
	defer unix.Munmap(mapped)
	m, err := NewQ4KMatMapped(rows, cols, mapped)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := NewQ4KMat(rows, cols, raw)
	if hugePagesOn() && &m.kq[0] == &mapped[0] {
		t.Error("the blocks were not moved out of the mapping")
	}
	x := randVec(rand.New(rand.NewPCG(13, 14)), 3*cols)
	a, b := make([]float32, 3*rows), make([]float32, 3*rows)
	m.MatMul(a, x, 3)
	ref.MatMul(b, x, 3)
	if !slices.Equal(a, b) {
		t.Error("the moved blocks give other products")
	}
	// The mapping still reads the file (its pages come back on demand).
	if !bytes.Equal(mapped[:4096], raw[:4096]) {
		t.Error("the mapping no longer reads the file")
	}
}

// mapBytes writes b to a file and maps it read-only.
func mapBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blocks")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapped, err := unix.Mmap(int(f.Fd()), 0, len(b), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Skip("no mmap:", err)
	}
	t.Cleanup(func() { unix.Munmap(mapped) })
	return mapped
}

// Q8_0 matrices unpacked from a file mapping, and matrices of another
// type re-quantized from one a panel at a time, are bit for bit those
// built from memory in one piece (rows not a multiple of 16 included),
// and the mapping still reads the file.
func TestQ8MatMapped(t *testing.T) {
	for _, rows := range []int{16, 1000, 4099} {
		cols := 1024
		w := randVec(rand.New(rand.NewPCG(uint64(rows), 15)), rows*cols)
		raw, err := EncodeQ8(rows, cols, w)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := NewQ8Mat(rows, cols, raw)
		mapped := mapBytes(t, raw)
		m, err := NewQ8MatMapped(rows, cols, mapped)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.q8q, ref.q8q) {
			t.Errorf("%d rows: the mapped Q8_0 blocks unpack differently", rows)
		}
		// float32 weights as the "other type", widened by a decoder.
		f32 := make([]byte, 4*len(w))
		for i, v := range w {
			putF32(f32, 4*i, v)
		}
		q, err := QuantizeQ8Mapped(rows, cols, 4*cols, mapBytes(t, f32), func(dst []float32, src []byte) error {
			for i := range dst {
				dst[i] = getF32(src, 4*i)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(q.q8q, ref.q8q) {
			t.Errorf("%d rows: re-quantized a panel at a time differs from QuantizeQ8", rows)
		}
		if !bytes.Equal(mapped[:4096], raw[:4096]) {
			t.Error("the mapping no longer reads the file")
		}
	}
	if _, err := QuantizeQ8Mapped(16, 64, 10, make([]byte, 161), nil); err == nil {
		t.Error("161 bytes passed as 16 rows of 10")
	}
	if _, err := QuantizeQ8Mapped(16, 64, 256, make([]byte, 16*256), func([]float32, []byte) error { return os.ErrInvalid }); err == nil {
		t.Error("a failing decoder gave a matrix")
	}
}
