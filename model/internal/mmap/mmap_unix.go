//go:build unix

package mmap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func mapFile(f *os.File, size int) ([]byte, func([]byte) error, error) {
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, unix.Munmap, nil
}

// release advises the whole pages of b away (MADV_DONTNEED).
func release(b []byte) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (p + 4095) &^ 4095
	hi := (p + uintptr(len(b))) &^ 4095
	if hi <= lo {
		return
	}
	_ = unix.Madvise(b[lo-p:hi-p], unix.MADV_DONTNEED)
}
