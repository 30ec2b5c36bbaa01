package kernels

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
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
