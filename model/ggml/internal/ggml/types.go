package ggml

import "fmt"

// The pinned ggml: what the prebuilt @node-llama-cpp/*@3.22.1 packages
// carry (their ggml_version() and ggml_commit()).
const (
	Version = "0.25.1"
	Commit  = "0ad4a86"
)

// Type is a ggml tensor element type (enum ggml_type).
type Type int32

// The element types this project uses.
const (
	TypeF32  Type = 0
	TypeF16  Type = 1
	TypeQ4_0 Type = 2
	TypeQ8_0 Type = 8
	TypeQ4_K Type = 12
	TypeQ5_K Type = 13
	TypeQ6_K Type = 14
	TypeI32  Type = 26
	TypeI64  Type = 27
	TypeBF16 Type = 30
)

func (t Type) String() string {
	switch t {
	case TypeF32:
		return "f32"
	case TypeF16:
		return "f16"
	case TypeQ4_0:
		return "q4_0"
	case TypeQ8_0:
		return "q8_0"
	case TypeQ4_K:
		return "q4_K"
	case TypeQ5_K:
		return "q5_K"
	case TypeQ6_K:
		return "q6_K"
	case TypeI32:
		return "i32"
	case TypeI64:
		return "i64"
	case TypeBF16:
		return "bf16"
	}
	return fmt.Sprintf("Type(%d)", int32(t))
}

// RopeNeoX is ggml_rope_ext's mode for rotating the pairs (x[i],
// x[i+n/2]) (GPT-NeoX, Qwen2); mode 0 (RopeNormal) rotates (x[2i],
// x[2i+1]).
const (
	RopeNormal = 0
	RopeNeoX   = 2
)

// DeviceType is a backend device's kind (enum ggml_backend_dev_type).
type DeviceType int32

// The device kinds.
const (
	DeviceCPU DeviceType = iota
	DeviceGPU
	DeviceIGPU
	DeviceAccel
	DeviceMeta
)

func (t DeviceType) String() string {
	switch t {
	case DeviceCPU:
		return "CPU"
	case DeviceGPU:
		return "GPU"
	case DeviceIGPU:
		return "iGPU"
	case DeviceAccel:
		return "accelerator"
	case DeviceMeta:
		return "meta"
	}
	return fmt.Sprintf("DeviceType(%d)", int32(t))
}

// BufferUsage tells a backend what a buffer holds (enum
// ggml_backend_buffer_usage).
type BufferUsage int32

// The buffer usages.
const (
	UsageAny     BufferUsage = 0
	UsageWeights BufferUsage = 1
	UsageCompute BufferUsage = 2
)

// LogLevel is a ggml log line's level (enum ggml_log_level).
type LogLevel int32

// The log levels; LogCont continues the previous line's level.
const (
	LogNone LogLevel = iota
	LogDebug
	LogInfo
	LogWarn
	LogError
	LogCont
)

// Status is a graph computation's result (enum ggml_status).
type Status int32

func (s Status) Error() string {
	switch s {
	case -2:
		return "ggml: allocation failed"
	case -1:
		return "ggml: computation failed"
	case 1:
		return "ggml: computation aborted"
	}
	return fmt.Sprintf("ggml: status %d", int32(s))
}

// Tensor is the head of ggml's struct ggml_tensor (its fields after the
// strides are not declared): a *Tensor is ggml's pointer, memory Go does
// not own, valid while the context that made it lives.
type Tensor struct {
	Type   Type
	_      int32
	Buffer Buffer
	Ne     [4]int64   // elements per dimension, the first the fastest
	Nb     [4]uintptr // bytes between neighbours in each dimension
}

// Opaque handles.
type (
	Context    uintptr // struct ggml_context *
	Graph      uintptr // struct ggml_cgraph *
	Backend    uintptr // ggml_backend_t
	Device     uintptr // ggml_backend_dev_t
	Reg        uintptr // ggml_backend_reg_t
	Buffer     uintptr // ggml_backend_buffer_t
	BufferType uintptr // ggml_backend_buffer_type_t
	Sched      uintptr // ggml_backend_sched_t
)

// initParams is struct ggml_init_params.
type initParams struct {
	memSize uintptr
	_       uintptr // mem_buffer: NULL, ggml allocates
	noAlloc bool
	_       [7]byte
}
