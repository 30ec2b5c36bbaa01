package gguf

import "fmt"

// Type is a ggml tensor element type, as stored in a tensor info.
type Type uint32

// The ggml tensor types. The numbering is ggml's; gaps are types that ggml
// has retired and that no GGUF file may use.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// typeInfo gives ggml's name, elements per block and bytes per block.
var typeInfo = [...]struct {
	name        string
	block, size int
}{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, BF16: {"BF16", 1, 2}, F64: {"F64", 1, 8},
	I8: {"I8", 1, 1}, I16: {"I16", 1, 2}, I32: {"I32", 1, 4}, I64: {"I64", 1, 8},
	Q4_0: {"Q4_0", 32, 18}, Q4_1: {"Q4_1", 32, 20}, Q5_0: {"Q5_0", 32, 22},
	Q5_1: {"Q5_1", 32, 24}, Q8_0: {"Q8_0", 32, 34}, Q8_1: {"Q8_1", 32, 36},
	Q2_K: {"Q2_K", 256, 84}, Q3_K: {"Q3_K", 256, 110}, Q4_K: {"Q4_K", 256, 144},
	Q5_K: {"Q5_K", 256, 176}, Q6_K: {"Q6_K", 256, 210}, Q8_K: {"Q8_K", 256, 292},
	IQ2_XXS: {"IQ2_XXS", 256, 66}, IQ2_XS: {"IQ2_XS", 256, 74},
	IQ3_XXS: {"IQ3_XXS", 256, 98}, IQ1_S: {"IQ1_S", 256, 50},
	IQ4_NL: {"IQ4_NL", 32, 18}, IQ3_S: {"IQ3_S", 256, 110},
	IQ2_S: {"IQ2_S", 256, 82}, IQ4_XS: {"IQ4_XS", 256, 136},
	IQ1_M: {"IQ1_M", 256, 56}, TQ1_0: {"TQ1_0", 256, 54}, TQ2_0: {"TQ2_0", 256, 66},
	MXFP4: {"MXFP4", 32, 17},
}

// String returns ggml's name for t ("Q8_0"), or "Type(n)" when t is unknown.
func (t Type) String() string {
	if t < Type(len(typeInfo)) && typeInfo[t].name != "" {
		return typeInfo[t].name
	}
	return fmt.Sprintf("Type(%d)", uint32(t))
}

// BlockSize returns the number of elements in one block of t: 1 for the
// plain types, 32 for Q4_0/Q8_0 and friends, 256 for the K-quants. It is 0
// when t is unknown.
func (t Type) BlockSize() int {
	if t < Type(len(typeInfo)) {
		return typeInfo[t].block
	}
	return 0
}

// TypeSize returns the number of bytes in one block of t, or 0 when t is
// unknown.
func (t Type) TypeSize() int {
	if t < Type(len(typeInfo)) {
		return typeInfo[t].size
	}
	return 0
}

// ValueType is the type tag of a metadata value.
type ValueType uint32

// The metadata value types, numbered as in the file.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeInfo = [...]struct {
	name string
	size int // bytes of a scalar in the file; 0 for string and array
}{
	ValueUint8: {"uint8", 1}, ValueInt8: {"int8", 1},
	ValueUint16: {"uint16", 2}, ValueInt16: {"int16", 2},
	ValueUint32: {"uint32", 4}, ValueInt32: {"int32", 4},
	ValueFloat32: {"float32", 4}, ValueBool: {"bool", 1},
	ValueString: {"string", 0}, ValueArray: {"array", 0},
	ValueUint64: {"uint64", 8}, ValueInt64: {"int64", 8},
	ValueFloat64: {"float64", 8},
}

// String returns the GGUF name of the value type ("uint32").
func (t ValueType) String() string {
	if t < ValueType(len(valueTypeInfo)) {
		return valueTypeInfo[t].name
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// size returns the encoded size of a scalar of type t, or 0 for strings,
// arrays and unknown types.
func (t ValueType) size() int {
	if t < ValueType(len(valueTypeInfo)) {
		return valueTypeInfo[t].size
	}
	return 0
}

func (t ValueType) known() bool { return t < ValueType(len(valueTypeInfo)) }

func (t ValueType) signed() bool {
	return t == ValueInt8 || t == ValueInt16 || t == ValueInt32 || t == ValueInt64
}

func (t ValueType) unsigned() bool {
	return t == ValueUint8 || t == ValueUint16 || t == ValueUint32 || t == ValueUint64
}
