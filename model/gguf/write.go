package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxNameLen is the longest tensor name ggml accepts (GGML_MAX_NAME less
// the terminating NUL).
const maxNameLen = 63

// WriteTensor is a tensor for Write.
type WriteTensor struct {
	Name string
	Dims []uint64 // ggml order: Dims[0] is the fastest-varying
	Type Type
	Data []byte // exactly the tensor's size: Elements/BlockSize*TypeSize bytes
}

// Write writes a GGUF version 3 file holding the metadata kv and the
// tensors, in the order given. Tensor data is aligned to general.alignment
// when kv sets it (it must be a uint32 power of two, as ggml requires) and
// to DefaultAlignment otherwise; each tensor is padded to the alignment, the
// layout ggml itself writes. Everything is checked before the first byte is
// written.
func Write(w io.Writer, kv []KV, tensors []WriteTensor) error {
	if err := write(w, kv, tensors); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	return nil
}

func write(w io.Writer, kv []KV, tensors []WriteTensor) error {
	align := uint64(DefaultAlignment)
	keys := make(map[string]bool, len(kv))
	for _, e := range kv {
		if keys[e.Key] {
			return fmt.Errorf("duplicate key %q", e.Key)
		}
		keys[e.Key] = true
		if err := checkValue(e.Value); err != nil {
			return fmt.Errorf("key %q: %w", e.Key, err)
		}
		if e.Key == "general.alignment" {
			a := e.Value.bits
			if e.Value.Type != ValueUint32 || a == 0 || a&(a-1) != 0 {
				return fmt.Errorf("general.alignment must be a uint32 power of two, not %s %s", e.Value.Type, e.Value)
			}
			align = a
		}
	}

	names := make(map[string]bool, len(tensors))
	offsets := make([]uint64, len(tensors))
	var off uint64
	for i, t := range tensors {
		switch {
		case names[t.Name]:
			return fmt.Errorf("duplicate tensor name %q", t.Name)
		case len(t.Name) > maxNameLen:
			return fmt.Errorf("tensor name %q is longer than %d bytes", t.Name, maxNameLen)
		case len(t.Dims) < 1 || len(t.Dims) > MaxDims:
			return fmt.Errorf("tensor %q: %d dimensions, want 1 to %d", t.Name, len(t.Dims), MaxDims)
		}
		names[t.Name] = true
		size, err := tensorSize(t.Dims, t.Type)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if uint64(len(t.Data)) != size {
			return fmt.Errorf("tensor %q: %d bytes of data, want %d for %s %v", t.Name, len(t.Data), size, t.Type, t.Dims)
		}
		offsets[i] = off
		off = alignUp(off+size, align)
	}

	e := &encoder{w: bufio.NewWriter(w)}
	e.write([]byte("GGUF"))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kv)))
	for _, kv := range kv {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.Type))
		e.value(kv.Value)
	}
	for i, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offsets[i])
	}
	e.pad(align)
	for _, t := range tensors {
		e.write(t.Data)
		e.pad(align)
	}
	return e.w.Flush()
}

// checkValue reports whether v can be encoded.
func checkValue(v Value) error {
	switch {
	case !v.Type.known():
		return fmt.Errorf("unknown value type %d", uint32(v.Type))
	case v.Type != ValueArray:
		return nil
	case v.Elem == ValueArray:
		return errors.New("nested arrays are not supported")
	case !v.Elem.known():
		return fmt.Errorf("unknown array element type %d", uint32(v.Elem))
	case v.Elem != ValueString && len(v.raw)%v.Elem.size() != 0:
		return fmt.Errorf("malformed %s array", v.Elem)
	}
	return nil
}

// encoder writes little-endian fields, counting bytes for padding. Errors
// stick in the bufio.Writer and surface at Flush.
type encoder struct {
	w   *bufio.Writer
	n   uint64
	buf [8]byte
}

func (e *encoder) write(p []byte) {
	e.w.Write(p)
	e.n += uint64(len(p))
}

func (e *encoder) u32(x uint32) { e.write(binary.LittleEndian.AppendUint32(e.buf[:0], x)) }
func (e *encoder) u64(x uint64) { e.write(binary.LittleEndian.AppendUint64(e.buf[:0], x)) }

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.w.WriteString(s)
	e.n += uint64(len(s))
}

func (e *encoder) value(v Value) {
	switch v.Type {
	case ValueString:
		e.str(v.str)
	case ValueArray:
		e.u32(uint32(v.Elem))
		e.u64(uint64(v.Len()))
		for _, s := range v.strs {
			e.str(s)
		}
		e.write(v.raw)
	default:
		b := e.buf[:v.Type.size()]
		storeBits(b, v.bits)
		e.write(b)
	}
}

var zeros [4096]byte

// pad writes zeros up to the next multiple of align.
func (e *encoder) pad(align uint64) {
	for n := alignUp(e.n, align) - e.n; n > 0; {
		k := min(n, uint64(len(zeros)))
		e.write(zeros[:k])
		n -= k
	}
}
