package kernels

import (
	"bytes"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mappedSinceGC counts the bytes mapped since mapWeightChunk last ran a
// collection.
var mappedSinceGC atomic.Int64

// gcEveryMapped is how many bytes of chunks may be mapped between forced
// collections. The collector paces itself by the Go heap, which the
// mappings are not part of: a process that loads and drops models would
// otherwise keep dead chunks mapped, and resident, for as long as its
// heap stays small.
const gcEveryMapped = 1 << 30

// mapWeightChunk maps size bytes (a multiple of hugePage) of anonymous
// memory aligned to a huge page and advises them for huge pages before
// anything touches them; the mapping goes when the chunk is unreachable.
// It returns nil if the mapping fails. The advice may fail (no THP in
// this kernel): the memory is then ordinary pages.
func mapWeightChunk(size int) *weightChunk {
	if mappedSinceGC.Add(int64(size)) > gcEveryMapped {
		mappedSinceGC.Store(0)
		runtime.GC() // dead chunks' cleanups unmap them
	}
	m, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(m))) & (hugePage - 1))
	c := &weightChunk{mem: m[off : off+size : off+size]}
	_ = unix.Madvise(c.mem, unix.MADV_HUGEPAGE)
	runtime.AddCleanup(c, func(m []byte) { _ = unix.Munmap(m) }, m)
	return c
}

// releaseMapped drops the process's pages of a read-only file mapping
// (those wholly inside b) after their contents were copied: they leave its
// resident set, the file stays in the page cache.
func releaseMapped(b []byte) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (p + 4095) &^ 4095
	hi := (p + uintptr(len(b))) &^ 4095
	if hi <= lo {
		return
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), lo-p)), hi-lo), unix.MADV_DONTNEED)
}

// hugePagesOn reports whether weight chunks get transparent huge pages:
// THP in "always" or "madvise" mode.
func hugePagesOn() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && !bytes.Contains(b, []byte("[never]"))
}
