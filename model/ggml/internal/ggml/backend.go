package ggml

import (
	"fmt"
	"unsafe"
)

// Devices lists the devices of the loaded backends, in the registry's
// order (GPUs first, the CPU last).
func Devices() []Device {
	n := int(fns.devCount())
	ds := make([]Device, n)
	for i := range ds {
		ds[i] = fns.devGet(uintptr(i))
	}
	return ds
}

// Name is the device's name: "CPU", "Vulkan0", "CUDA0", ...
func (d Device) Name() string { return fns.devName(d) }

// Description is the device's description (the GPU's or CPU's model).
func (d Device) Description() string { return fns.devDescription(d) }

// Type is the device's kind.
func (d Device) Type() DeviceType { return fns.devType(d) }

// Memory is the device's free and total memory in bytes.
func (d Device) Memory() (free, total uint64) {
	var f, t uintptr
	fns.devMemory(d, &f, &t)
	return uint64(f), uint64(t)
}

// SupportsOp reports whether the device can run t's operation, or, for a
// tensor of no operation (a weight), hold it: ggml-vulkan refuses a
// tensor larger than one binding addresses (maxStorageBufferRange:
// 128 MiB on lavapipe), and ggml's scheduler aborts the process on a
// graph using a weight its device refuses.
func (d Device) SupportsOp(t *Tensor) bool { return fns.devSupportsOp(d, t) }

// Reg is the backend registration the device belongs to.
func (d Device) Reg() Reg { return fns.devBackendReg(d) }

// Init starts a backend (a stream) on the device.
func (d Device) Init() (Backend, error) {
	b := fns.devInit(d, 0)
	if b == 0 {
		return 0, fmt.Errorf("ggml: could not start a backend on device %s", d.Name())
	}
	return b, nil
}

// Name is the registration's name ("CPU", "Vulkan", ...).
func (r Reg) Name() string { return fns.regName(r) }

// ProcAddress is the address of one of the backend's own functions, by
// name, or 0.
func (r Reg) ProcAddress(name string) uintptr { return fns.regGetProcAddress(r, name) }

// Free stops the backend.
func (b Backend) Free() { fns.backendFree(b) }

// Name is the backend's name.
func (b Backend) Name() string { return fns.backendName(b) }

// Device is the backend's device.
func (b Backend) Device() Device { return fns.backendGetDevice(b) }

// BufferType is the backend's default buffer type (its device memory).
func (b Backend) BufferType() BufferType { return fns.backendDefaultBuft(b) }

// Compute runs graph g on the backend and waits for it.
func (b Backend) Compute(g Graph) error {
	if s := fns.backendGraphCompute(b, g); s != 0 {
		return s
	}
	return nil
}

// SetThreads sets the threads of a CPU backend (through its registration's
// ggml_backend_set_n_threads); it reports false for a backend that has no
// such function.
func (b Backend) SetThreads(n int) bool {
	p := b.Device().Reg().ProcAddress("ggml_backend_set_n_threads")
	if p == 0 {
		return false
	}
	setThreads(p, b, n)
	return true
}

// Name is the buffer type's name.
func (t BufferType) Name() string { return fns.buftName(t) }

// AllocTensors allocates, in one buffer of the backend, the data of every
// tensor of c that has none.
func (c Context) AllocTensors(b Backend) (Buffer, error) {
	buf := fns.allocCtxTensors(c, b)
	if buf == 0 {
		return 0, fmt.Errorf("ggml: could not allocate the tensors' memory on %s", b.Name())
	}
	return buf, nil
}

// Free releases the buffer.
func (b Buffer) Free() { fns.bufferFree(b) }

// Size is the buffer's size in bytes.
func (b Buffer) Size() int { return int(fns.bufferGetSize(b)) }

// Clear sets every byte of the buffer to v.
func (b Buffer) Clear(v uint8) { fns.bufferClear(b, v) }

// SetUsage tells the backend what the buffer holds.
func (b Buffer) SetUsage(u BufferUsage) { fns.bufferSetUsage(b, u) }

// Set copies data into t's memory from byte offset off.
func Set[E any](t *Tensor, data []E, off int) {
	if len(data) == 0 {
		return
	}
	n := uintptr(len(data)) * unsafe.Sizeof(data[0])
	fns.tensorSet(t, unsafe.Pointer(&data[0]), uintptr(off), n)
}

// Get copies t's memory from byte offset off into data.
func Get[E any](t *Tensor, data []E, off int) {
	if len(data) == 0 {
		return
	}
	n := uintptr(len(data)) * unsafe.Sizeof(data[0])
	fns.tensorGet(t, unsafe.Pointer(&data[0]), uintptr(off), n)
}

// NewSched returns a scheduler over the backends (the CPU's last, as
// ggml requires) for graphs of up to graphSize nodes: it places each node
// on the first backend that holds its weights and supports it, and
// allocates the graphs' memory in their buffers.
func NewSched(backends []Backend, graphSize int) (Sched, error) {
	if len(backends) == 0 {
		return 0, fmt.Errorf("ggml: a scheduler over no backend")
	}
	s := fns.schedNew(&backends[0], 0, int32(len(backends)), uintptr(graphSize), false, true)
	if s == 0 {
		return 0, fmt.Errorf("ggml: could not make a scheduler")
	}
	return s, nil
}

// Free releases the scheduler and its buffers.
func (s Sched) Free() { fns.schedFree(s) }

// Reserve sizes the scheduler's buffers for graph g, a worst case: later
// graphs no larger allocate nothing.
func (s Sched) Reserve(g Graph) error {
	if !fns.schedReserve(s, g) {
		return fmt.Errorf("ggml: could not reserve the memory of a graph of %d nodes", g.Nodes())
	}
	return nil
}

// Alloc assigns g's nodes to backends and memory; inputs are set after.
func (s Sched) Alloc(g Graph) error {
	if !fns.schedAllocGraph(s, g) {
		return fmt.Errorf("ggml: could not allocate a graph of %d nodes", g.Nodes())
	}
	return nil
}

// Compute runs the allocated graph g and waits for it.
func (s Sched) Compute(g Graph) error {
	if st := fns.schedGraphCompute(s, g); st != 0 {
		return st
	}
	return nil
}

// Reset forgets the last graph's allocation (before building the next).
func (s Sched) Reset() { fns.schedReset(s) }

// BufferSize is the size of the scheduler's compute buffer on backend b.
func (s Sched) BufferSize(b Backend) int { return int(fns.schedGetBufferSize(s, b)) }

// Splits is how many pieces the last graph was cut into (1 when one
// backend ran it all).
func (s Sched) Splits() int { return int(fns.schedGetNSplits(s)) }

// SetBackend places node t on backend b.
func (s Sched) SetBackend(t *Tensor, b Backend) { fns.schedSetTensorBackend(s, t, b) }
