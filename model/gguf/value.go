package gguf

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// Value is a metadata value: a scalar, a string, or an array of scalars or
// strings (GGUF allows nested arrays, but ggml rejects them and so does this
// package). Build values with the constructors (String, Uint32, Float32s,
// ...) and read them with the accessors, which convert between numeric types
// only when the value fits.
type Value struct {
	Type ValueType // type of the value
	Elem ValueType // element type when Type is ValueArray

	bits uint64   // scalar payload; signed integers are sign-extended
	str  string   // ValueString
	strs []string // array of strings
	raw  []byte   // array of scalars, packed little-endian as in the file
}

// String returns a string value, or writes any other value in a readable
// form ("64", "[1 2 3]", `["<unk>" "<s>" ... (512 elements)]`).
func (v Value) String() string {
	switch v.Type {
	case ValueString:
		return v.str
	case ValueArray:
		const show = 8
		var b strings.Builder
		b.WriteByte('[')
		n := v.Len()
		for i := range min(n, show) {
			if i > 0 {
				b.WriteByte(' ')
			}
			if e := v.Index(i); e.Type == ValueString {
				b.WriteString(strconv.Quote(e.str))
			} else {
				b.WriteString(e.String())
			}
		}
		if n > show {
			b.WriteString(" ... (" + strconv.Itoa(n) + " elements)")
		}
		b.WriteByte(']')
		return b.String()
	case ValueBool:
		return strconv.FormatBool(v.bits != 0)
	case ValueFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(v.bits))), 'g', -1, 32)
	case ValueFloat64:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64)
	}
	if v.Type.signed() {
		return strconv.FormatInt(int64(v.bits), 10)
	}
	return strconv.FormatUint(v.bits, 10)
}

// Uint returns an integer value of any width or signedness that is not
// negative.
func (v Value) Uint() (uint64, bool) {
	switch {
	case v.Type.unsigned():
		return v.bits, true
	case v.Type.signed() && int64(v.bits) >= 0:
		return v.bits, true
	}
	return 0, false
}

// Int returns an integer value of any width or signedness that fits int64.
func (v Value) Int() (int64, bool) {
	switch {
	case v.Type.signed():
		return int64(v.bits), true
	case v.Type.unsigned() && v.bits <= math.MaxInt64:
		return int64(v.bits), true
	}
	return 0, false
}

// Float returns a floating-point or integer value as float64.
func (v Value) Float() (float64, bool) {
	switch {
	case v.Type == ValueFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case v.Type == ValueFloat64:
		return math.Float64frombits(v.bits), true
	case v.Type.signed():
		return float64(int64(v.bits)), true
	case v.Type.unsigned():
		return float64(v.bits), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) { return v.bits != 0, v.Type == ValueBool }

// Len returns the number of elements of an array, and 0 for other values.
func (v Value) Len() int {
	switch {
	case v.Type != ValueArray:
		return 0
	case v.Elem == ValueString:
		return len(v.strs)
	case v.Elem.size() > 0:
		return len(v.raw) / v.Elem.size()
	}
	return 0
}

// Index returns element i of an array. It panics if v is not an array or i
// is out of range, like indexing a slice.
func (v Value) Index(i int) Value {
	if v.Type != ValueArray {
		panic("gguf: Index of non-array " + v.Type.String() + " value")
	}
	if v.Elem == ValueString {
		return Value{Type: ValueString, str: v.strs[i]}
	}
	sz := v.Elem.size()
	return Value{Type: v.Elem, bits: loadBits(v.Elem, v.raw[i*sz:(i+1)*sz])}
}

// Strings returns a copy of an array of strings.
func (v Value) Strings() ([]string, bool) {
	if v.Type != ValueArray || v.Elem != ValueString {
		return nil, false
	}
	return slices.Clone(v.strs), true
}

// Float32s returns an array of floats or integers as float32s.
func (v Value) Float32s() ([]float32, bool) {
	if v.Type != ValueArray || v.Elem.size() == 0 || v.Elem == ValueBool {
		return nil, false
	}
	out := make([]float32, v.Len())
	for i := range out {
		f, _ := v.Index(i).Float()
		out[i] = float32(f)
	}
	return out, true
}

// Int32s returns an array of integers as int32s, if every element fits.
func (v Value) Int32s() ([]int32, bool) {
	if v.Type != ValueArray || !(v.Elem.signed() || v.Elem.unsigned()) {
		return nil, false
	}
	out := make([]int32, v.Len())
	for i := range out {
		x, ok := v.Index(i).Int()
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// loadBits decodes a little-endian scalar of type t from b, sign-extending
// signed integers.
func loadBits(t ValueType, b []byte) uint64 {
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	if t.signed() {
		shift := 64 - 8*len(b)
		u = uint64(int64(u<<shift) >> shift)
	}
	return u
}

// storeBits encodes the low len(b) bytes of u into b, little-endian.
func storeBits(b []byte, u uint64) {
	for i := range b {
		b[i] = byte(u >> (8 * i))
	}
}

func scalar(t ValueType, bits uint64) Value { return Value{Type: t, bits: bits} }

// String returns a string value.
func String(s string) Value { return Value{Type: ValueString, str: s} }

// Uint8, Int8, ..., Float64 and Bool return scalar values of those types.
func Uint8(x uint8) Value     { return scalar(ValueUint8, uint64(x)) }
func Int8(x int8) Value       { return scalar(ValueInt8, uint64(int64(x))) }
func Uint16(x uint16) Value   { return scalar(ValueUint16, uint64(x)) }
func Int16(x int16) Value     { return scalar(ValueInt16, uint64(int64(x))) }
func Uint32(x uint32) Value   { return scalar(ValueUint32, uint64(x)) }
func Int32(x int32) Value     { return scalar(ValueInt32, uint64(int64(x))) }
func Uint64(x uint64) Value   { return scalar(ValueUint64, x) }
func Int64(x int64) Value     { return scalar(ValueInt64, uint64(x)) }
func Float32(x float32) Value { return scalar(ValueFloat32, uint64(math.Float32bits(x))) }
func Float64(x float64) Value { return scalar(ValueFloat64, math.Float64bits(x)) }
func Bool(x bool) Value {
	if x {
		return scalar(ValueBool, 1)
	}
	return scalar(ValueBool, 0)
}

// Strings returns an array-of-strings value holding a copy of s.
func Strings(s []string) Value {
	v := Value{Type: ValueArray, Elem: ValueString}
	if len(s) > 0 {
		v.strs = slices.Clone(s)
	}
	return v
}

// Float32s returns an array-of-float32 value.
func Float32s(x []float32) Value {
	return packArray(ValueFloat32, len(x), func(i int) uint64 { return uint64(math.Float32bits(x[i])) })
}

// Int32s returns an array-of-int32 value.
func Int32s(x []int32) Value {
	return packArray(ValueInt32, len(x), func(i int) uint64 { return uint64(int64(x[i])) })
}

// Uint32s returns an array-of-uint32 value.
func Uint32s(x []uint32) Value {
	return packArray(ValueUint32, len(x), func(i int) uint64 { return uint64(x[i]) })
}

func packArray(elem ValueType, n int, bits func(int) uint64) Value {
	v := Value{Type: ValueArray, Elem: elem}
	if n == 0 {
		return v
	}
	sz := elem.size()
	v.raw = make([]byte, n*sz)
	for i := range n {
		storeBits(v.raw[i*sz:(i+1)*sz], bits(i))
	}
	return v
}
