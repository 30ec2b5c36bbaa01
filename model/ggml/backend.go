package ggml

import (
	"errors"
	"fmt"
	"sync"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

func init() { model.RegisterBackend("ggml", newBackend) }

// newBackend is the model.BackendFactory of "ggml": New with the options
// SetDefaults set.
func newBackend(m *model.Model, c model.CacheConfig) (model.Backend, error) {
	return New(m, c, Defaults())
}

// layerWeights are one transformer block's tensors on the device.
type layerWeights struct {
	attnNorm, ffnNorm *gg.Tensor
	wq, wk, wv, wo    *gg.Tensor
	bq, bk, bv        *gg.Tensor // Qwen2's biases, or nil
	w1, w2, w3        *gg.Tensor
}

// Backend runs a model on a ggml device: the model's weights uploaded
// once, the KV pool's blocks on the device, each Forward one graph. It is
// a model.Backend, used from one goroutine.
type Backend struct {
	m       *model.Model
	pool    *kvcache.Pool
	device  gg.Device  // the device
	dev     gg.Backend // the device's backend
	cpu     gg.Backend // the CPU's, for operations the device lacks (== dev on the CPU)
	sched   gg.Sched
	threads int // ggml-cpu's threads

	// restartOnFree restarts the device's backend before a graph runs
	// after device memory that earlier graphs ran on was freed (on
	// Vulkan: restart.go); ran says whether a graph ran on the backend
	// since it started, stale that memory was freed since.
	restartOnFree, ran, stale bool
	// lavapipe is whether the device is lavapipe, where under flash
	// attention the backend restarts before every graph (restart.go).
	lavapipe bool
	restarts int

	wctx gg.Context // the weights' tensor headers
	wbuf gg.Buffer  // the weights' memory
	kctx gg.Context // the KV pool's tensor headers
	kbuf gg.Buffer  // the KV pool's memory

	tokEmbd, outNorm, output, freqFactors *gg.Tensor
	layers                                []layerWeights

	// The device's KV pool: per layer, keys [KVDim, slots] and values
	// transposed, [slots, KVDim] (each dimension's values of all slots
	// together, as the probabilities' product with them wants), slot
	// b*BlockSize+s holding position s of block b.
	k, v  []*gg.Tensor
	kvT   gg.Type
	slots int
	// scratch is the first slot of a block past the pool's, written by
	// a padded step's extra rows and copies (plan.go's padRows), read by
	// no sequence.
	scratch int

	last   lastGraph  // the last step's graph, for the next step of its shape
	graphs GraphStats // the graphs built and run again
	spans  spanCount  // the attention's slots read against those used

	lazy    bool       // the logits rows stay on the device until read (lazy.go)
	fetchMu sync.Mutex // a row's fetch against Forward and Close
	closed  bool
	rows    logitRows // where they stay
	retired []retired
	steps   int // successful Forwards

	statsK   int          // top tokens per row of the statistics (0: no statistics)
	statsBuf statsScratch // readStats' buffers

	pending []kvcache.Copy // copies on write not yet performed
	broken  error          // set when a computation failed: the device cache is undefined
	// flash attends with ggml_flash_attn_ext (one op a group and layer,
	// as llama.cpp does on a GPU), the values kept untransposed as the
	// keys are; else a product, a softmax and a product over transposed
	// values. On a GPU by default, but lavapipe (Options.FlashAttn).
	flash bool
	// sumAttn sums the attention a step hands out on the device (the
	// metrics' sums: model.AttentionSums) instead of copying its scores
	// and probabilities to the host: on a GPU.
	sumAttn bool
	// padSlots rounds each step's attention span up (on a GPU: a graph
	// whose shapes repeat can be replayed, as CUDA graphs are).
	padSlots int
	// gatherMode chooses between a group's span and its blocks gathered
	// (gatherAuto: by their slots).
	gatherMode int
	// batchMode chooses between the groups attending one by one and as
	// one batch (batchAuto: a batch on a GPU when a step has several).
	batchMode int
	// splitRatio splits a set of rows sharing blocks into a group per
	// sequence when its rows x blocks exceed splitRatio times the blocks
	// its rows see (0: never).
	splitRatio float64
	chunk      int      // the most rows a graph runs (Options.Chunk)
	chunks     chunkOut // a step's chunks' outputs, kept until its last has run
	st         step     // the step's host-side inputs, reused
	out        model.Output
}

// New returns a Backend running m on the device o names, over a new
// cache of c (model.Model.NewCache): the ggml backend, as
// model.NewBackend("ggml", m, c) makes it with the options SetDefaults
// set.
func New(m *model.Model, c model.CacheConfig, o Options) (*Backend, error) {
	if m.Closed() {
		return nil, model.ErrClosed
	}
	if err := Load(o); err != nil {
		return nil, err
	}
	pool, err := m.NewCache(c.Tokens, c.BlockSize, c.DType)
	if err != nil {
		return nil, err
	}
	b := &Backend{m: m, pool: pool, statsK: min(DefaultStatsK, m.Config.Vocab), chunk: o.chunk(), splitRatio: defaultSplitRatio}
	if err := b.start(o); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.upload(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.reserve(); err != nil {
		b.Close()
		return nil, err
	}
	d := b.dev.Device()
	gg.Logf(gg.LogInfo, "model/ggml: %s on %s (%s): weights %.1f MiB, KV pool of %d positions %.1f MiB (%v), graph memory %.1f MiB",
		m.Source, d.Name(), d.Description(), mib(b.wbuf.Size()), b.scratch, mib(b.kbuf.Size()), b.kvT, mib(b.sched.BufferSize(b.dev)))
	return b, nil
}

func mib(n int) float64 { return float64(n) / (1 << 20) }

// start starts the device's backend (and the CPU's beside it for a GPU)
// and the scheduler.
func (b *Backend) start(o Options) error {
	d, err := pickDevice(o.Device)
	if err != nil {
		return err
	}
	b.device, b.threads = d, o.threads()
	if b.dev, err = d.Init(); err != nil {
		return err
	}
	b.dev.SetThreads(b.threads)
	if d.Type() == gg.DeviceCPU {
		b.cpu = b.dev
	} else {
		cd, err := cpuDevice()
		if err != nil {
			return err
		}
		if b.cpu, err = cd.Init(); err != nil {
			return err
		}
		b.cpu.SetThreads(b.threads)
	}
	if d.Type() != gg.DeviceCPU {
		b.padSlots = 256
		b.lazy, b.sumAttn = true, true
		// A search's branches attend together however far apart they
		// have grown: split, they would be a group each, and either
		// many more nodes (group by group) or their shared prefix
		// gathered once per branch (in a batch), where the masked
		// products a split saves cost a GPU little.
		b.splitRatio = 0
	}
	if err := CheckFlashAttn(o.FlashAttn); err != nil {
		return fmt.Errorf("ggml: %w", err)
	}
	vulkan := d.Reg().Name() == "Vulkan"
	lavapipe := vulkan && isLavapipe(d.Description())
	switch o.FlashAttn {
	case FlashOn:
		b.flash = true
	case FlashOff:
	default: // as llama.cpp: on a GPU
		b.flash = d.Type() != gg.DeviceCPU && !lavapipe
	}
	b.restartOnFree, b.lavapipe = vulkan, lavapipe
	if b.flash && lavapipe {
		gg.Logf(gg.LogInfo, "model/ggml: flash attention on lavapipe (%s): the backend restarts before every step", d.Description())
	}
	return b.newSched()
}

// newSched makes the scheduler over the device's backend and the CPU's.
func (b *Backend) newSched() error {
	backends := []gg.Backend{b.dev}
	if b.cpu != b.dev {
		backends = append(backends, b.cpu)
	}
	var err error
	b.sched, err = gg.NewSched(backends, b.graphSize(maxGroups))
	return err
}

// upload makes the weights' and the KV pool's tensors on the device and
// copies the weights there.
func (b *Backend) upload() error {
	c, w := &b.m.Config, b.m.Weights
	pc := b.pool.Config()
	b.scratch = pc.MaxBlocks * pc.BlockSize
	b.slots = b.scratch + pc.BlockSize
	b.kvT = gg.TypeF32
	if pc.DType == kvcache.F16 {
		b.kvT = gg.TypeF16
	}

	b.wctx = gg.NewContext(16*c.Layers+16, 0)
	type upload struct {
		t    *gg.Tensor
		data []byte
		from *model.Tensor // the weight whose bytes these are, or nil
	}
	var ups []upload
	mats := map[*model.Tensor]*gg.Tensor{} // a tied classifier is the embedding
	mat := func(m *model.Tensor, name string) *gg.Tensor {
		if t, ok := mats[m]; ok {
			return t
		}
		ty, data := matData(m)
		t := b.wctx.NewTensor(ty, int64(m.Cols), int64(m.Rows)).SetName(name)
		ups = append(ups, upload{t, data, m})
		mats[m] = t
		return t
	}
	vec := func(x []float32, name string) *gg.Tensor {
		if x == nil {
			return nil
		}
		t := b.wctx.NewTensor(gg.TypeF32, int64(len(x))).SetName(name)
		ups = append(ups, upload{t, f32Bytes(x), nil})
		return t
	}
	b.tokEmbd = mat(w.TokenEmbd, "token_embd")
	b.outNorm = vec(w.OutputNorm, "output_norm")
	b.output = mat(w.Output, "output")
	b.freqFactors = vec(c.RopeFreqFactors, "rope_freqs")
	b.layers = make([]layerWeights, c.Layers)
	for l := range w.Layers {
		lw, p := &w.Layers[l], fmt.Sprintf("blk.%d.", l)
		b.layers[l] = layerWeights{
			attnNorm: vec(lw.AttnNorm, p+"attn_norm"), ffnNorm: vec(lw.FFNNorm, p+"ffn_norm"),
			wq: mat(lw.Wq, p+"attn_q"), wk: mat(lw.Wk, p+"attn_k"), wv: mat(lw.Wv, p+"attn_v"), wo: mat(lw.Wo, p+"attn_output"),
			bq: vec(lw.Bq, p+"attn_q.bias"), bk: vec(lw.Bk, p+"attn_k.bias"), bv: vec(lw.Bv, p+"attn_v.bias"),
			w1: mat(lw.W1, p+"ffn_gate"), w2: mat(lw.W2, p+"ffn_down"), w3: mat(lw.W3, p+"ffn_up"),
		}
	}
	for _, u := range ups {
		if err := b.fits(u.t); err != nil {
			return err
		}
	}
	var err error
	if b.wbuf, err = b.wctx.AllocTensors(b.dev); err != nil {
		return err
	}
	b.wbuf.SetUsage(gg.UsageWeights)
	for _, u := range ups {
		gg.Set(u.t, u.data, 0)
		if u.from != nil {
			u.from.Release() // a file's pages, copied: resident once (read again, they come back)
		}
	}
	return b.allocKV()
}

// allocKV makes the KV pool's tensors on the device, cleared: a slot
// nothing wrote holds zeros, so that the masked-out slots attention
// multiplies by zero are finite.
func (b *Backend) allocKV() error {
	c := &b.m.Config
	kctx := gg.NewContext(2*c.Layers, 0)
	b.k, b.v = make([]*gg.Tensor, c.Layers), make([]*gg.Tensor, c.Layers)
	for l := range c.Layers {
		b.k[l] = kctx.NewTensor(b.kvT, int64(c.KVDim()), int64(b.slots)).SetName(fmt.Sprintf("cache_k_l%d", l))
		if b.flash { // as the keys
			b.v[l] = kctx.NewTensor(b.kvT, int64(c.KVDim()), int64(b.slots)).SetName(fmt.Sprintf("cache_v_l%d", l))
		} else { // transposed
			b.v[l] = kctx.NewTensor(b.kvT, int64(b.slots), int64(c.KVDim())).SetName(fmt.Sprintf("cache_v_l%d", l))
		}
	}
	if err := b.fits(b.k[0]); err != nil {
		kctx.Free()
		return fmt.Errorf("%w (a KV pool of %d positions; a smaller one)", err, b.slots)
	}
	buf, err := kctx.AllocTensors(b.dev)
	if err != nil {
		kctx.Free()
		return fmt.Errorf("%w (a KV pool of %d positions)", err, b.slots)
	}
	buf.Clear(0)
	b.kbuf, b.kctx = buf, kctx
	return nil
}

// fits checks that the device holds t (a weight, a layer's keys or
// values, the logits rows' store) as one tensor: ggml-vulkan refuses one
// larger than a binding addresses (128 MiB on lavapipe), and ggml's
// scheduler aborts the process on a graph using a tensor of the device's
// memory the device refuses.
func (b *Backend) fits(t *gg.Tensor) error {
	if b.device.SupportsOp(t) {
		return nil
	}
	return fmt.Errorf("ggml: %s (%s) cannot hold %s (%s, %.1f MiB) as one tensor: a smaller model, or another device",
		b.device.Name(), b.device.Description(), t.Name(), t.Type, mib(t.Bytes()))
}

// Cache returns the block manager of the backend's KV cache.
func (b *Backend) Cache() *kvcache.Pool { return b.pool }

// Close releases the device's memory and backends.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.dropGraph()
	b.fetchMu.Lock() // a row fetched from now on reads as zeros
	b.rows.free()
	for _, r := range b.retired {
		r.s.free()
	}
	b.retired, b.closed = nil, true
	b.fetchMu.Unlock()
	if b.sched != 0 {
		b.sched.Free()
	}
	for _, buf := range []gg.Buffer{b.wbuf, b.kbuf} {
		if buf != 0 {
			buf.Free()
		}
	}
	for _, c := range []gg.Context{b.wctx, b.kctx} {
		if c != 0 {
			c.Free()
		}
	}
	if b.cpu != 0 && b.cpu != b.dev {
		b.cpu.Free()
	}
	if b.dev != 0 {
		b.dev.Free()
	}
	b.sched, b.wbuf, b.kbuf, b.wctx, b.kctx, b.cpu, b.dev = 0, 0, 0, 0, 0, 0, 0
	b.broken = errors.New("ggml: backend used after Close")
	return nil
}

// DeviceName is the name of the device the backend runs on.
func (b *Backend) DeviceName() string { return b.device.Name() }
