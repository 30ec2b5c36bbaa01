// Package mmap maps model files read-only into memory, so that loading a
// multi-gigabyte model costs no copy and pages come in as they are used.
package mmap

import (
	"fmt"
	"os"
)

// File is a read-only mapping of a whole file.
type File struct {
	Data   []byte
	unmap  func([]byte) error
	closed bool
}

// Open maps path read-only. Where mapping is not available or fails, the
// file is read into memory instead; callers cannot tell the difference.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return &File{Data: []byte{}}, nil
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("%s: file of %d bytes is too large for this platform", path, size)
	}
	if data, unmap, err := mapFile(f, int(size)); err == nil {
		return &File{Data: data, unmap: unmap}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return &File{Data: data}, nil
}

// Close releases the mapping. Data must not be used afterwards.
func (m *File) Close() error {
	if m == nil || m.closed {
		return nil
	}
	m.closed = true
	data := m.Data
	m.Data = nil
	if m.unmap != nil {
		return m.unmap(data)
	}
	return nil
}

// Mapped reports whether Data is a file mapping (not a copy read into
// memory).
func (m *File) Mapped() bool { return m != nil && m.unmap != nil && !m.closed }

// Release drops the process's pages of the mapping wholly inside
// Data[off:off+n] (they leave its resident set; the file stays in the page
// cache, and the pages come back if read again). It does nothing to a
// copy read into memory.
func (m *File) Release(off, n int) {
	if !m.Mapped() || off < 0 || n <= 0 || off > len(m.Data)-n {
		return
	}
	release(m.Data[off : off+n])
}

// Release drops the process's pages wholly inside b, which must be part
// of a mapping of Open (Data, a mapped File's): as File.Release, for a
// caller that holds only the slice.
func Release(b []byte) {
	if len(b) > 0 {
		release(b)
	}
}
