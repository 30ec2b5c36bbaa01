package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/entropix-search/entropix-search/model/internal/mmap"
)

// DefaultAlignment is the data alignment used when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the largest number of dimensions a tensor may have (ggml's
// GGML_MAX_DIMS).
const MaxDims = 4

// Smallest possible encodings, used to bound counts by the bytes left before
// anything is allocated from them.
const (
	minKVSize     = 8 + 4 + 1     // key length, value type, one-byte value
	minTensorSize = 8 + 4 + 4 + 8 // name length, n_dims, type, offset
)

// File is a parsed GGUF file. Its metadata is copied out of the file image;
// tensor data is not: TensorData returns slices of the image, valid until
// Close. A File is safe for concurrent use by readers.
type File struct {
	Version    uint32       // 2 or 3
	Alignment  uint64       // data alignment: general.alignment or DefaultAlignment
	DataOffset uint64       // absolute file offset of the data section
	KV         []KV         // metadata in file order
	Tensors    []TensorInfo // tensor infos in file order

	data    []byte         // the whole file image
	mapping *mmap.File     // nil for Parse
	keys    map[string]int // KV index by key
	byName  map[string]int // Tensors index by name
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // ggml order: Dims[0] is the fastest-varying (a row's length)
	Type   Type
	Offset uint64 // absolute offset of the data in the file
	Size   uint64 // bytes of data
}

// Elements returns the number of elements of the tensor.
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Open memory-maps the named file read-only (reading it into memory where
// mapping is not possible) and parses it. Close releases the mapping.
// Tensor data is read lazily from the mapping; if another process truncates
// the file while it is mapped, access faults.
func Open(path string) (*File, error) {
	mf, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := parse(mf.Data)
	if err != nil {
		mf.Close()
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f.mapping = mf
	return f, nil
}

// Parse parses a GGUF image held in memory. The File refers to data for
// tensor contents, so data must not change while the File is in use.
func Parse(data []byte) (*File, error) {
	f, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return f, nil
}

// Close releases the file's memory mapping, if any. Slices returned by
// TensorData must not be used afterwards.
func (f *File) Close() error {
	mf := f.mapping
	f.data, f.mapping = nil, nil
	if err := mf.Close(); err != nil {
		return fmt.Errorf("gguf: munmap: %w", err)
	}
	return nil
}

// Lookup returns the value of a metadata key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// String returns the value of a string-typed key.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Lookup(key)
	if !ok || v.Type != ValueString {
		return "", false
	}
	return v.str, true
}

// Uint returns the value of a non-negative integer key (see Value.Uint).
func (f *File) Uint(key string) (uint64, bool) { return get(f, key, Value.Uint) }

// Int returns the value of an integer key (see Value.Int).
func (f *File) Int(key string) (int64, bool) { return get(f, key, Value.Int) }

// Float returns the value of a numeric key (see Value.Float).
func (f *File) Float(key string) (float64, bool) { return get(f, key, Value.Float) }

// Bool returns the value of a bool key.
func (f *File) Bool(key string) (bool, bool) { return get(f, key, Value.Bool) }

// Strings returns the value of an array-of-strings key.
func (f *File) Strings(key string) ([]string, bool) { return get(f, key, Value.Strings) }

// Float32s returns the value of a numeric array key (see Value.Float32s).
func (f *File) Float32s(key string) ([]float32, bool) { return get(f, key, Value.Float32s) }

// Int32s returns the value of an integer array key (see Value.Int32s).
func (f *File) Int32s(key string) ([]int32, bool) { return get(f, key, Value.Int32s) }

// get converts the value of key, reporting false when the key is absent
// (the zero Value must not read as a present uint8 0).
func get[T any](f *File, key string, conv func(Value) (T, bool)) (T, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		var zero T
		return zero, false
	}
	return conv(v)
}

// Architecture returns general.architecture ("llama"), or "" if absent.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the bytes of a tensor of f, as a slice of the file
// image that must not be modified (a mapped image is read-only). It returns
// nil after Close, or if t does not lie within the file.
func (f *File) TensorData(t *TensorInfo) []byte {
	n := uint64(len(f.data))
	if t.Offset > n || t.Size > n-t.Offset {
		return nil
	}
	return f.data[t.Offset : t.Offset+t.Size : t.Offset+t.Size]
}

// decoder reads little-endian fields from a file image. Its errors name the
// field and the offset; callers add which entry the field belongs to.
type decoder struct {
	b   []byte
	off uint64
}

func (d *decoder) left() uint64 { return uint64(len(d.b)) - d.off }

func (d *decoder) next(n uint64, what string) ([]byte, error) {
	if n > d.left() {
		return nil, fmt.Errorf("truncated %s at offset %d: need %d bytes, %d left", what, d.off, n, d.left())
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	p, err := d.next(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	p, err := d.next(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

func (d *decoder) str(what string) (string, error) {
	if d.left() < 8 {
		return "", fmt.Errorf("truncated %s length at offset %d: need 8 bytes, %d left", what, d.off, d.left())
	}
	n := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	if n > d.left() {
		return "", fmt.Errorf("%s length %d at offset %d runs past end of file (%d bytes left)", what, n, d.off-8, d.left())
	}
	p, _ := d.next(n, what)
	return string(p), nil
}

// value reads a value of type t.
func (d *decoder) value(t ValueType) (Value, error) {
	switch t {
	case ValueString:
		s, err := d.str("string")
		return Value{Type: t, str: s}, err
	case ValueArray:
		return d.array()
	}
	sz := t.size()
	if sz == 0 {
		return Value{}, fmt.Errorf("unknown value type %d at offset %d", uint32(t), d.off-4)
	}
	if uint64(sz) > d.left() {
		return Value{}, fmt.Errorf("truncated %s value at offset %d: need %d bytes, %d left", t, d.off, sz, d.left())
	}
	p, _ := d.next(uint64(sz), "value")
	if t == ValueBool && p[0] > 1 {
		return Value{}, fmt.Errorf("invalid bool %d at offset %d", p[0], d.off-1)
	}
	return Value{Type: t, bits: loadBits(t, p)}, nil
}

func (d *decoder) array() (Value, error) {
	et, err := d.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	n, err := d.u64("array length")
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: ValueArray, Elem: elem}
	switch {
	case elem == ValueArray:
		return Value{}, fmt.Errorf("nested arrays are not supported (offset %d)", d.off-12)
	case elem == ValueString:
		if n > d.left()/8 {
			return Value{}, fmt.Errorf("array of %d strings cannot fit in the %d bytes left", n, d.left())
		}
		if n > 0 {
			v.strs = make([]string, n)
		}
		for i := range v.strs {
			if v.strs[i], err = d.str("string"); err != nil {
				return Value{}, fmt.Errorf("element %d of %d: %w", i, n, err)
			}
		}
		return v, nil
	case elem.size() == 0:
		return Value{}, fmt.Errorf("unknown array element type %d at offset %d", et, d.off-12)
	}
	sz := uint64(elem.size())
	if n > d.left()/sz {
		return Value{}, fmt.Errorf("array of %d %s values (%d bytes each) cannot fit in the %d bytes left", n, elem, sz, d.left())
	}
	p, _ := d.next(n*sz, "array")
	if elem == ValueBool {
		for i, c := range p {
			if c > 1 {
				return Value{}, fmt.Errorf("element %d of %d: invalid bool %d", i, n, c)
			}
		}
	}
	if n > 0 {
		v.raw = append([]byte(nil), p...)
	}
	return v, nil
}

func parse(b []byte) (*File, error) {
	d := &decoder{b: b}
	if err := checkMagic(b); err != nil {
		return nil, err
	}
	d.off = 4
	ver, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case ver == 1:
		return nil, errors.New("GGUF version 1 is not supported (it used 32-bit counts); convert the model again with a current llama.cpp")
	case ver == 0x02000000 || ver == 0x03000000:
		return nil, fmt.Errorf("big-endian GGUF (version %d byte-swapped) is not supported", bits.ReverseBytes32(ver))
	case ver != 2 && ver != 3:
		return nil, fmt.Errorf("unsupported GGUF version %d (want 2 or 3)", ver)
	}
	nt, err := d.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nkv, err := d.u64("metadata count")
	if err != nil {
		return nil, err
	}
	left := d.left()
	if nkv > left/minKVSize {
		return nil, fmt.Errorf("metadata count %d cannot fit in the %d bytes after the header", nkv, left)
	}
	if nt > (left-nkv*minKVSize)/minTensorSize {
		return nil, fmt.Errorf("tensor count %d cannot fit in the %d bytes after the header along with %d metadata entries", nt, left, nkv)
	}

	f := &File{
		Version:   ver,
		Alignment: DefaultAlignment,
		data:      b,
		KV:        make([]KV, 0, min(nkv, 1024)),
		keys:      make(map[string]int, min(nkv, 1024)),
		Tensors:   make([]TensorInfo, 0, min(nt, 1024)),
		byName:    make(map[string]int, min(nt, 1024)),
	}
	for i := range nkv {
		key, err := d.str("key")
		if err != nil {
			return nil, fmt.Errorf("metadata entry %d of %d: %w", i, nkv, err)
		}
		if _, dup := f.keys[key]; dup {
			return nil, fmt.Errorf("metadata entry %d: duplicate key %q", i, key)
		}
		var v Value
		t, err := d.u32("value type")
		if err == nil {
			v, err = d.value(ValueType(t))
		}
		if err != nil {
			return nil, fmt.Errorf("metadata entry %d (%q): %w", i, key, err)
		}
		f.keys[key] = len(f.KV)
		f.KV = append(f.KV, KV{key, v})
	}
	if v, ok := f.Lookup("general.alignment"); ok {
		a, ok := v.Uint()
		if !ok || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("general.alignment %s (%s) is not a power of two", v, v.Type)
		}
		f.Alignment = a
	}

	for i := range nt {
		t, err := d.tensorInfo()
		if err != nil {
			if t.Name != "" {
				return nil, fmt.Errorf("tensor %d (%q): %w", i, t.Name, err)
			}
			return nil, fmt.Errorf("tensor %d of %d: %w", i, nt, err)
		}
		if _, dup := f.byName[t.Name]; dup {
			return nil, fmt.Errorf("tensor %d: duplicate name %q", i, t.Name)
		}
		f.byName[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	// The data section starts at the next multiple of the alignment; a file
	// without tensors may end before it.
	f.DataOffset = alignUp(d.off, f.Alignment)
	size := uint64(len(b))
	dataLen := uint64(0)
	if f.DataOffset < size {
		dataLen = size - f.DataOffset
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("tensor %d (%q): offset %d is not a multiple of the alignment %d", i, t.Name, t.Offset, f.Alignment)
		}
		if t.Offset > dataLen || t.Size > dataLen-t.Offset {
			return nil, fmt.Errorf("tensor %d (%q): %d bytes of data at offset %d run past the end of the file (data section holds %d bytes at file offset %d)",
				i, t.Name, t.Size, t.Offset, dataLen, f.DataOffset)
		}
		t.Offset += f.DataOffset
	}
	return f, nil
}

// tensorInfo reads one tensor info, checking its shape and type. The
// returned Offset is still relative to the data section.
func (d *decoder) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = d.str("tensor name"); err != nil {
		return t, err
	}
	nd, err := d.u32("dimension count")
	if err != nil {
		return t, err
	}
	if nd > MaxDims {
		return t, fmt.Errorf("%d dimensions, at most %d allowed", nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	for j := range t.Dims {
		if t.Dims[j], err = d.u64("dimension"); err != nil {
			return t, err
		}
	}
	typ, err := d.u32("tensor type")
	if err != nil {
		return t, err
	}
	t.Type = Type(typ)
	if t.Offset, err = d.u64("data offset"); err != nil {
		return t, err
	}
	t.Size, err = tensorSize(t.Dims, t.Type)
	return t, err
}

// tensorSize returns the byte size of a tensor, checking that its type is
// known, that its shape fits in int64 (ggml's element count type) and that
// rows hold whole blocks.
func tensorSize(dims []uint64, t Type) (uint64, error) {
	bs, ts := uint64(t.BlockSize()), uint64(t.TypeSize())
	if ts == 0 {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	n := uint64(1)
	for _, dim := range dims {
		if dim > math.MaxInt64 {
			return 0, fmt.Errorf("dimension %d is larger than 2^63-1", dim)
		}
		hi, lo := bits.Mul64(n, dim)
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v has more than 2^63-1 elements", dims)
		}
		n = lo
	}
	row := uint64(1) // ggml treats missing dimensions as 1
	if len(dims) > 0 {
		row = dims[0]
	}
	if row%bs != 0 {
		return 0, fmt.Errorf("row length %d is not a multiple of the %s block size %d", row, t, bs)
	}
	hi, size := bits.Mul64(n/bs, ts)
	if hi != 0 || size > math.MaxInt64 {
		return 0, fmt.Errorf("shape %v of %s is more than 2^63-1 bytes", dims, t)
	}
	return size, nil
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }

// checkMagic checks the GGUF magic and, when it is wrong, guesses what the
// file is instead.
func checkMagic(b []byte) error {
	if len(b) < 4 {
		return fmt.Errorf("file is %d bytes, too short for the GGUF magic", len(b))
	}
	if string(b[:4]) == "GGUF" {
		return nil
	}
	err := fmt.Errorf("bad magic %q (% x), want \"GGUF\"", b[:4], b[:4])
	u := binary.LittleEndian.Uint32(b)
	switch u {
	case 0x67676d6c, 0x67676d66, 0x67676a74, 0x67676c61: // ggml, ggmf, ggjt, ggla
		return fmt.Errorf("%w: this is a legacy GGML/GGJT file; convert it to GGUF", err)
	case 0x616b3432: // "ak42", llama2.c's versioned export
		return fmt.Errorf("%w: this looks like a llama2.c checkpoint (versioned export format)", err)
	}
	// The legacy llama2.c checkpoint starts with seven int32s: dim,
	// hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative when
	// the classifier is not shared), seq_len.
	if len(b) >= 28 {
		var c [7]int32
		plausible := true
		for i := range c {
			c[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
			v := c[i]
			if i == 5 && v < 0 {
				v = -v
			}
			plausible = plausible && v > 0 && v <= 1<<20
		}
		if plausible {
			return fmt.Errorf("%w: this looks like a llama2.c checkpoint (dim=%d, n_layers=%d, n_heads=%d, vocab_size=%d)", err, c[0], c[2], c[3], c[5])
		}
	}
	return err
}

// Mapped reports whether f's image is a file mapping (Open, where the
// system maps files) rather than memory: only then may a loader release
// the pages of tensors it has copied (see Release).
func (f *File) Mapped() bool { return f.mapping.Mapped() }

// Release drops the process's pages of t's data once a loader has copied
// them (they leave its resident set; the file stays in the page cache,
// and TensorData still reads it). It does nothing unless f is Mapped.
func (f *File) Release(t *TensorInfo) {
	if f.Mapped() && f.TensorData(t) != nil {
		f.mapping.Release(int(t.Offset), int(t.Size))
	}
}
