package ggml

import (
	"errors"
	"fmt"
	"os"
	"unsafe"
)

// fns holds the bound functions, each field's tag naming its C symbol.
// Load fills them; each is called through the typed wrappers below. The
// functions a step's graph calls hundreds of times, whose arguments and
// result are all integers or pointers, are plain addresses called
// through call (purego.SyscallN: some 0.1 µs); the others go through
// purego.RegisterFunc's typed functions (0.4-2 µs a call).
var fns struct {
	version func() string          `sym:"ggml_version"`
	commit  func() string          `sym:"ggml_commit"`
	logSet  func(cb, user uintptr) `sym:"ggml_log_set"`

	// Contexts and tensors.
	init                func(p initParams) Context                                                      `sym:"ggml_init"`
	free                uintptr                                                                         `sym:"ggml_free"`
	tensorOverhead      func() uintptr                                                                  `sym:"ggml_tensor_overhead"`
	graphOverheadCustom func(size uintptr, grads bool) uintptr                                          `sym:"ggml_graph_overhead_custom"`
	newTensor1d         uintptr                                                                         `sym:"ggml_new_tensor_1d"`
	newTensor2d         uintptr                                                                         `sym:"ggml_new_tensor_2d"`
	newTensor3d         uintptr                                                                         `sym:"ggml_new_tensor_3d"`
	setName             func(t *Tensor, name string) *Tensor                                            `sym:"ggml_set_name"`
	getName             func(t *Tensor) string                                                          `sym:"ggml_get_name"`
	setInput            uintptr                                                                         `sym:"ggml_set_input"`
	setOutput           uintptr                                                                         `sym:"ggml_set_output"`
	nbytes              uintptr                                                                         `sym:"ggml_nbytes"`
	rowSize             uintptr                                                                         `sym:"ggml_row_size"`
	blckSize            func(t Type) int64                                                              `sym:"ggml_blck_size"`
	typeName            func(t Type) string                                                             `sym:"ggml_type_name"`
	newGraphCustom      uintptr                                                                         `sym:"ggml_new_graph_custom"`
	buildForwardExpand  uintptr                                                                         `sym:"ggml_build_forward_expand"`
	graphNNodes         uintptr                                                                         `sym:"ggml_graph_n_nodes"`
	add                 uintptr                                                                         `sym:"ggml_add"`
	sub                 uintptr                                                                         `sym:"ggml_sub"`
	mul                 uintptr                                                                         `sym:"ggml_mul"`
	sqr                 uintptr                                                                         `sym:"ggml_sqr"`
	exp                 uintptr                                                                         `sym:"ggml_exp"`
	abs                 uintptr                                                                         `sym:"ggml_abs"`
	clamp               func(c Context, a *Tensor, lo, hi float32) *Tensor                              `sym:"ggml_clamp"`
	log                 uintptr                                                                         `sym:"ggml_log"`
	scale               func(c Context, a *Tensor, s float32) *Tensor                                   `sym:"ggml_scale"`
	silu                uintptr                                                                         `sym:"ggml_silu"`
	swigluSplit         uintptr                                                                         `sym:"ggml_swiglu_split"`
	rmsNorm             func(c Context, a *Tensor, eps float32) *Tensor                                 `sym:"ggml_rms_norm"`
	mulMat              uintptr                                                                         `sym:"ggml_mul_mat"`
	sumRows             uintptr                                                                         `sym:"ggml_sum_rows"`
	argmax              uintptr                                                                         `sym:"ggml_argmax"`
	topK                uintptr                                                                         `sym:"ggml_top_k"`
	getRows             uintptr                                                                         `sym:"ggml_get_rows"`
	setRows             uintptr                                                                         `sym:"ggml_set_rows"`
	cpy                 uintptr                                                                         `sym:"ggml_cpy"`
	cont                uintptr                                                                         `sym:"ggml_cont"`
	concat              uintptr                                                                         `sym:"ggml_concat"`
	reshape2d           uintptr                                                                         `sym:"ggml_reshape_2d"`
	reshape3d           uintptr                                                                         `sym:"ggml_reshape_3d"`
	reshape4d           uintptr                                                                         `sym:"ggml_reshape_4d"`
	view1d              uintptr                                                                         `sym:"ggml_view_1d"`
	view2d              uintptr                                                                         `sym:"ggml_view_2d"`
	view3d              uintptr                                                                         `sym:"ggml_view_3d"`
	permute             uintptr                                                                         `sym:"ggml_permute"`
	softMaxExt          func(c Context, a, mask *Tensor, scale, maxBias float32) *Tensor                `sym:"ggml_soft_max_ext"`
	precSetAcc          func(a *Tensor, prec int32) bool                                                `sym:"ggml_prec_set_acc"`
	flashAttnExt        func(c Context, q, k, v, mask *Tensor, scale, maxBias, softcap float32) *Tensor `sym:"ggml_flash_attn_ext"`
	ropeExt             func(c Context, a, pos, freqFactors *Tensor, nDims, mode, nCtxOrig int32,
		freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) *Tensor `sym:"ggml_rope_ext"`

	// Backends, devices, buffers.
	loadAllFromPath       func(dir string)                                                                             `sym:"ggml_backend_load_all_from_path"`
	devCount              func() uintptr                                                                               `sym:"ggml_backend_dev_count"`
	devGet                func(i uintptr) Device                                                                       `sym:"ggml_backend_dev_get"`
	devName               func(d Device) string                                                                        `sym:"ggml_backend_dev_name"`
	devDescription        func(d Device) string                                                                        `sym:"ggml_backend_dev_description"`
	devType               func(d Device) DeviceType                                                                    `sym:"ggml_backend_dev_type"`
	devMemory             func(d Device, free, total *uintptr)                                                         `sym:"ggml_backend_dev_memory"`
	devBackendReg         func(d Device) Reg                                                                           `sym:"ggml_backend_dev_backend_reg"`
	devSupportsOp         func(d Device, t *Tensor) bool                                                               `sym:"ggml_backend_dev_supports_op"`
	devInit               func(d Device, params uintptr) Backend                                                       `sym:"ggml_backend_dev_init"`
	regName               func(r Reg) string                                                                           `sym:"ggml_backend_reg_name"`
	regGetProcAddress     func(r Reg, name string) uintptr                                                             `sym:"ggml_backend_reg_get_proc_address"`
	backendFree           func(b Backend)                                                                              `sym:"ggml_backend_free"`
	backendName           func(b Backend) string                                                                       `sym:"ggml_backend_name"`
	backendGetDevice      func(b Backend) Device                                                                       `sym:"ggml_backend_get_device"`
	backendDefaultBuft    func(b Backend) BufferType                                                                   `sym:"ggml_backend_get_default_buffer_type"`
	backendGraphCompute   func(b Backend, g Graph) Status                                                              `sym:"ggml_backend_graph_compute"`
	buftName              func(t BufferType) string                                                                    `sym:"ggml_backend_buft_name"`
	allocCtxTensors       func(c Context, b Backend) Buffer                                                            `sym:"ggml_backend_alloc_ctx_tensors"`
	bufferFree            func(b Buffer)                                                                               `sym:"ggml_backend_buffer_free"`
	bufferGetSize         func(b Buffer) uintptr                                                                       `sym:"ggml_backend_buffer_get_size"`
	bufferClear           func(b Buffer, v uint8)                                                                      `sym:"ggml_backend_buffer_clear"`
	bufferSetUsage        func(b Buffer, u BufferUsage)                                                                `sym:"ggml_backend_buffer_set_usage"`
	tensorSet             func(t *Tensor, data unsafe.Pointer, off, size uintptr)                                      `sym:"ggml_backend_tensor_set"`
	tensorGet             func(t *Tensor, data unsafe.Pointer, off, size uintptr)                                      `sym:"ggml_backend_tensor_get"`
	schedNew              func(bs *Backend, bufts uintptr, n int32, graphSize uintptr, parallel, opOffload bool) Sched `sym:"ggml_backend_sched_new"`
	schedFree             func(s Sched)                                                                                `sym:"ggml_backend_sched_free"`
	schedReserve          func(s Sched, g Graph) bool                                                                  `sym:"ggml_backend_sched_reserve"`
	schedAllocGraph       func(s Sched, g Graph) bool                                                                  `sym:"ggml_backend_sched_alloc_graph"`
	schedGraphCompute     func(s Sched, g Graph) Status                                                                `sym:"ggml_backend_sched_graph_compute"`
	schedReset            func(s Sched)                                                                                `sym:"ggml_backend_sched_reset"`
	schedGetBufferSize    func(s Sched, b Backend) uintptr                                                             `sym:"ggml_backend_sched_get_buffer_size"`
	schedGetNSplits       func(s Sched) int32                                                                          `sym:"ggml_backend_sched_get_n_splits"`
	schedSetTensorBackend func(s Sched, t *Tensor, b Backend)                                                          `sym:"ggml_backend_sched_set_tensor_backend"`
}

// tensorOf is the *Tensor at address r, memory ggml owns.
func tensorOf(r uintptr) *Tensor { return *(**Tensor)(unsafe.Pointer(&r)) }

// addr is t's address, for call.
func (t *Tensor) addr() uintptr { return uintptr(unsafe.Pointer(t)) }

func (c Context) op1(fn uintptr, a *Tensor) *Tensor { return tensorOf(call(fn, uintptr(c), a.addr())) }

func (c Context) op2(fn uintptr, a, b *Tensor) *Tensor {
	return tensorOf(call(fn, uintptr(c), a.addr(), b.addr()))
}

// ErrNotLoaded is returned by the functions that need the library before
// Load succeeded.
var ErrNotLoaded = errors.New("ggml: library not loaded")

// LibVersion returns the loaded library's ggml_version() and
// ggml_commit().
func LibVersion() (version, commit string) { return fns.version(), fns.commit() }

// checkVersion refuses a library other than the pinned one.
func checkVersion(dir string) error {
	v, c := fns.version(), fns.commit()
	if v != Version || c != Commit {
		return fmt.Errorf("ggml: the libraries in %s are ggml %s (commit %s); this program is built for ggml %s (commit %s), "+
			"whose function signatures it assumes: use the pinned libraries (model/ggml/getlibs.sh) or a build of that commit", dir, v, c, Version, Commit)
	}
	return nil
}

// NewContext returns a context for up to maxTensors tensor headers and a
// graph of graphSize nodes (0: none), their data allocated elsewhere (by
// a backend buffer or the scheduler): ggml_init with no_alloc.
func NewContext(maxTensors, graphSize int) Context {
	size := uintptr(maxTensors) * fns.tensorOverhead()
	if graphSize > 0 {
		size += fns.graphOverheadCustom(uintptr(graphSize), false)
	}
	return fns.init(initParams{memSize: size, noAlloc: true})
}

// Free releases the context and its tensor headers (not their data).
func (c Context) Free() { call(fns.free, uintptr(c)) }

// NewTensor returns a tensor of type t and one to three dimensions ne.
func (c Context) NewTensor(t Type, ne ...int64) *Tensor {
	switch len(ne) {
	case 1:
		return tensorOf(call(fns.newTensor1d, uintptr(c), uintptr(t), uintptr(ne[0])))
	case 2:
		return tensorOf(call(fns.newTensor2d, uintptr(c), uintptr(t), uintptr(ne[0]), uintptr(ne[1])))
	case 3:
		return tensorOf(call(fns.newTensor3d, uintptr(c), uintptr(t), uintptr(ne[0]), uintptr(ne[1]), uintptr(ne[2])))
	}
	panic(fmt.Sprintf("ggml: tensor of %d dimensions", len(ne)))
}

// SetName names t (for ggml's messages and graph dumps) and returns it.
func (t *Tensor) SetName(name string) *Tensor { return fns.setName(t, name) }

// Name is t's name.
func (t *Tensor) Name() string { return fns.getName(t) }

// SetInput marks t as a graph input: the allocator gives it its own
// memory, set before the computation.
func (t *Tensor) SetInput() { call(fns.setInput, t.addr()) }

// SetOutput marks t as a graph output: the allocator does not reuse its
// memory for later nodes.
func (t *Tensor) SetOutput() { call(fns.setOutput, t.addr()) }

// Bytes is the size of t's data (ggml_nbytes).
func (t *Tensor) Bytes() int { return int(call(fns.nbytes, t.addr())) }

// RowSize is the bytes of ne elements of type t (ggml_row_size); ne must
// be a multiple of BlockSize(t).
func RowSize(t Type, ne int) int { return int(call(fns.rowSize, uintptr(t), uintptr(ne))) }

// BlockSize is the elements of type t that share a block (1 for floats).
func BlockSize(t Type) int { return int(fns.blckSize(t)) }

// TypeName is ggml's name of type t.
func TypeName(t Type) string { return fns.typeName(t) }

// NewGraph returns an empty graph of at most size nodes in c.
func (c Context) NewGraph(size int) Graph {
	return Graph(call(fns.newGraphCustom, uintptr(c), uintptr(size), 0))
}

// Expand adds t and every node it depends on to g.
func (g Graph) Expand(t *Tensor) { call(fns.buildForwardExpand, uintptr(g), t.addr()) }

// Nodes is the number of nodes in g.
func (g Graph) Nodes() int { return int(int32(call(fns.graphNNodes, uintptr(g)))) }

// Add is a + b, b broadcast over a.
func (c Context) Add(a, b *Tensor) *Tensor { return c.op2(fns.add, a, b) }

// Sub is a - b, b broadcast over a.
func (c Context) Sub(a, b *Tensor) *Tensor { return c.op2(fns.sub, a, b) }

// Mul is a * b elementwise, b broadcast over a.
func (c Context) Mul(a, b *Tensor) *Tensor { return c.op2(fns.mul, a, b) }

// Sqr is a * a elementwise.
func (c Context) Sqr(a *Tensor) *Tensor { return c.op1(fns.sqr, a) }

// Exp is e to the power of a, elementwise.
func (c Context) Exp(a *Tensor) *Tensor { return c.op1(fns.exp, a) }

// Abs is |a|, elementwise.
func (c Context) Abs(a *Tensor) *Tensor { return c.op1(fns.abs, a) }

// Clamp is a held within [lo, hi], elementwise.
func (c Context) Clamp(a *Tensor, lo, hi float32) *Tensor { return fns.clamp(c, a, lo, hi) }

// Log is the natural logarithm of a, elementwise.
func (c Context) Log(a *Tensor) *Tensor { return c.op1(fns.log, a) }

// Scale is a * s.
func (c Context) Scale(a *Tensor, s float32) *Tensor { return fns.scale(c, a, s) }

// SiLU is x * sigmoid(x), elementwise.
func (c Context) SiLU(a *Tensor) *Tensor { return c.op1(fns.silu, a) }

// SwiGLU is silu(a) * b, elementwise.
func (c Context) SwiGLU(a, b *Tensor) *Tensor { return c.op2(fns.swigluSplit, a, b) }

// RMSNorm is each row of a divided by its root mean square (with eps
// added to the mean square).
func (c Context) RMSNorm(a *Tensor, eps float32) *Tensor { return fns.rmsNorm(c, a, eps) }

// MulMat is the product of every row of a with every row of b:
// a [K, M, A2, A3], b [K, N, B2, B3] (B2 a multiple of A2: b's slice i
// meets a's slice i/(B2/A2)) gives [M, N, B2, B3]. On the CPU, b is
// converted to a's vec_dot type first (Q8_0 for Q8_0 weights, F16 for
// F16).
func (c Context) MulMat(a, b *Tensor) *Tensor { return c.op2(fns.mulMat, a, b) }

// SumRows sums each row: [n, ...] gives [1, ...].
func (c Context) SumRows(a *Tensor) *Tensor { return c.op1(fns.sumRows, a) }

// Argmax is each row's index of its largest element (I32 [rows]).
func (c Context) Argmax(a *Tensor) *Tensor { return c.op1(fns.argmax, a) }

// TopK is each row's indices of its k largest elements, in no particular
// order (I32 [k, rows]).
func (c Context) TopK(a *Tensor, k int) *Tensor {
	return tensorOf(call(fns.topK, uintptr(c), a.addr(), uintptr(k)))
}

// GetRows gathers rows of a: a [n, r, ...] and I32 b [m, ...] give
// F32 [n, m, ...] (dequantized).
func (c Context) GetRows(a, b *Tensor) *Tensor { return c.op2(fns.getRows, a, b) }

// SetRows writes the rows of b into a at the rows idx (I64 or I32)
// names, converting to a's type, and returns a view of a.
func (c Context) SetRows(a, b, idx *Tensor) *Tensor {
	return tensorOf(call(fns.setRows, uintptr(c), a.addr(), b.addr(), idx.addr()))
}

// Cpy copies a into b (converting) and returns a view of b.
func (c Context) Cpy(a, b *Tensor) *Tensor { return c.op2(fns.cpy, a, b) }

// Cont is a copy of a, contiguous.
func (c Context) Cont(a *Tensor) *Tensor { return c.op1(fns.cont, a) }

// Concat is a and b joined along dimension dim (their other dimensions
// equal).
func (c Context) Concat(a, b *Tensor, dim int) *Tensor {
	return tensorOf(call(fns.concat, uintptr(c), a.addr(), b.addr(), uintptr(dim)))
}

// Reshape is a view of the contiguous a with a new shape of 2, 3 or 4
// dimensions.
func (c Context) Reshape(a *Tensor, ne ...int64) *Tensor {
	switch len(ne) {
	case 2:
		return tensorOf(call(fns.reshape2d, uintptr(c), a.addr(), uintptr(ne[0]), uintptr(ne[1])))
	case 3:
		return tensorOf(call(fns.reshape3d, uintptr(c), a.addr(), uintptr(ne[0]), uintptr(ne[1]), uintptr(ne[2])))
	case 4:
		return tensorOf(call(fns.reshape4d, uintptr(c), a.addr(), uintptr(ne[0]), uintptr(ne[1]), uintptr(ne[2]), uintptr(ne[3])))
	}
	panic(fmt.Sprintf("ggml: reshape to %d dimensions", len(ne)))
}

// View1D is a view of ne0 elements of a from byte offset off.
func (c Context) View1D(a *Tensor, ne0 int, off int) *Tensor {
	return tensorOf(call(fns.view1d, uintptr(c), a.addr(), uintptr(ne0), uintptr(off)))
}

// View2D is a view of a: ne0 x ne1 elements, rows nb1 bytes apart, from
// byte offset off.
func (c Context) View2D(a *Tensor, ne0, ne1, nb1, off int) *Tensor {
	return tensorOf(call(fns.view2d, uintptr(c), a.addr(), uintptr(ne0), uintptr(ne1), uintptr(nb1), uintptr(off)))
}

// View3D is a view of a: ne0 x ne1 x ne2 elements with strides nb1 and
// nb2 bytes, from byte offset off.
func (c Context) View3D(a *Tensor, ne0, ne1, ne2, nb1, nb2, off int) *Tensor {
	return tensorOf(call(fns.view3d, uintptr(c), a.addr(), uintptr(ne0), uintptr(ne1), uintptr(ne2), uintptr(nb1), uintptr(nb2), uintptr(off)))
}

// Permute is a view of a with its dimensions moved: dimension i goes to
// position axes[i].
func (c Context) Permute(a *Tensor, ax0, ax1, ax2, ax3 int) *Tensor {
	return tensorOf(call(fns.permute, uintptr(c), a.addr(), uintptr(ax0), uintptr(ax1), uintptr(ax2), uintptr(ax3)))
}

// SoftMax is the softmax of each row of a*scale + mask (mask nil: none;
// else [a.Ne[0], >= a.Ne[1]], broadcast over a's slices).
func (c Context) SoftMax(a, mask *Tensor, scale float32) *Tensor {
	return fns.softMaxExt(c, a, mask, scale, 0)
}

// AccF32 asks that product a (a MulMat or a FlashAttn) sum in F32
// whatever its operands' types (ggml-vulkan's products may otherwise sum
// F16 operands in F16), as llama.cpp asks of its attention, and returns
// a.
func AccF32(a *Tensor) *Tensor {
	const precF32 = 10 // GGML_PREC_F32
	if !fns.precSetAcc(a, precF32) {
		panic("ggml: AccF32 of an op that is not a product")
	}
	return a
}

// FlashAttn is attention in one op: for each query row of q [d, rows,
// heads, n3], softmax(q·k*scale + mask) over keys k [d, kv, kvHeads, n3]
// weighing values v [dv, kv, kvHeads, n3] (not transposed; query head h
// reads key head h*kvHeads/heads), mask an F16 [kv, rows] (contiguous,
// broadcast over heads, and over n3 when it has one slice). The result
// is [dv, heads, rows, n3]: heads before rows.
func (c Context) FlashAttn(q, k, v, mask *Tensor, scale float32) *Tensor {
	return fns.flashAttnExt(c, q, k, v, mask, scale, 0, 0)
}

// Rope rotates the pairs of the first nDims elements of each row of a
// [n, heads, tokens] by the angles of I32 positions pos [tokens]: pair i
// at frequency base^(-2i/nDims) (divided by freqFactors[i] when it is
// not nil); mode RopeNormal or RopeNeoX. No YaRN scaling.
func (c Context) Rope(a, pos, freqFactors *Tensor, nDims, mode, nCtxOrig int, base float32) *Tensor {
	return fns.ropeExt(c, a, pos, freqFactors, int32(nDims), int32(mode), int32(nCtxOrig), base, 1, 0, 1, 0, 0)
}

// DirEnv is the environment variable naming the ggml library folder when
// no folder is given.
const DirEnv = "ENTROPIX_GGML_DIR"

// ErrNoLibrary is returned by ResolveDir when no folder is named.
var ErrNoLibrary = errors.New("ggml: no ggml libraries: give their folder with --ggml-dir DIR or " + DirEnv +
	" (a folder with libggml-base and libggml*; model/ggml/getlibs.sh fetches the pinned ones)")

// ResolveDir returns the library folder to load: dir, else $ENTROPIX_GGML_DIR,
// else ErrNoLibrary.
func ResolveDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(DirEnv)
	}
	if dir == "" {
		return "", ErrNoLibrary
	}
	return dir, nil
}
