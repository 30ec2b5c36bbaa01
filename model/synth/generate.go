package synth

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// Scales of the random weights, as in GPT-2's initialization: every matrix
// is normal with standard deviation initStd, except the projections that
// write into the residual stream (attention output, FFN down), which are
// further divided by sqrt(2*layers) so that the stream's variance does not
// grow with depth.
const initStd = 0.02

// chunkValues is the number of values drawn from one seeded generator: a
// tensor's values depend on the seed, the tensor's index and the chunk, not
// on how the work is spread over threads.
const chunkValues = 1 << 16

// tensor is one named weight of a generated model. A matrix has rows x
// cols values (cols is the row length, GGUF's first dimension); a vector
// has rows == 1 and vec set.
type tensor struct {
	name       string
	rows, cols int
	vec        bool    // 1-D: a norm's weights, all one
	std        float64 // standard deviation of a matrix's values

	f32 []float32 // values (F32 or a norm)
	raw []byte    // GGUF bytes: a quantized matrix's, or with raw (build) all
	typ gguf.Type // a matrix's type
}

// tensors lists the weights of a model of shape s in GGUF order and names.
func tensors(s Shape) []*tensor {
	hd := s.HeadDim()
	qd, kvd := s.Heads*hd, s.KVHeads*hd
	resid := initStd / math.Sqrt(float64(2*s.Layers))
	mat := func(name string, rows, cols int, std float64) *tensor {
		return &tensor{name: name + ".weight", rows: rows, cols: cols, std: std}
	}
	vec := func(name string, n int) *tensor {
		return &tensor{name: name + ".weight", rows: 1, cols: n, vec: true}
	}
	ts := []*tensor{mat("token_embd", s.Vocab, s.Dim, initStd)}
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			vec(p+"attn_norm", s.Dim),
			mat(p+"attn_q", qd, s.Dim, initStd),
			mat(p+"attn_k", kvd, s.Dim, initStd),
			mat(p+"attn_v", kvd, s.Dim, initStd),
			mat(p+"attn_output", s.Dim, qd, resid),
			vec(p+"ffn_norm", s.Dim),
			mat(p+"ffn_gate", s.HiddenDim, s.Dim, initStd),
			mat(p+"ffn_down", s.Dim, s.HiddenDim, resid),
			mat(p+"ffn_up", s.HiddenDim, s.Dim, initStd))
	}
	ts = append(ts, vec("output_norm", s.Dim))
	if !s.Tied {
		ts = append(ts, mat("output", s.Vocab, s.Dim, initStd))
	}
	return ts
}

// fill draws t's values: ones for a norm, normal * t.std for a matrix.
// Chunk c of tensor index ti comes from PCG(seed, ti<<32 | c).
func fill(t *tensor, ti int, seed uint64) {
	n := t.rows * t.cols
	t.f32 = make([]float32, n)
	if t.vec {
		for i := range t.f32 {
			t.f32[i] = 1
		}
		return
	}
	src := rand.NewPCG(0, 0)
	r := rand.New(src)
	for c := 0; c*chunkValues < n; c++ {
		src.Seed(seed, uint64(ti)<<32|uint64(c))
		x := t.f32[c*chunkValues : min(n, (c+1)*chunkValues)]
		for i := range x {
			x[i] = float32(r.NormFloat64() * t.std)
		}
	}
}

// quantizable reports whether t can be stored as Q8_0.
func (t *tensor) quantizable() bool { return !t.vec && t.cols%kernels.Q8BlockSize == 0 }

// build draws every tensor of a model of shape s and encodes the
// quantized matrices; with raw set it also keeps the float32 tensors'
// GGUF bytes (and drops their float32 values). Tensors are built in
// parallel, largest first.
func build(s Shape, dtype kernels.DType, seed uint64, raw bool) ([]*tensor, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	switch dtype {
	case kernels.F32, kernels.Q8_0, kernels.Q4_K, kernels.Q6_K, kernels.Q5_K, kernels.Q4_0, kernels.F16, kernels.BF16:
	default:
		return nil, fmt.Errorf("synth: weight type %v is not supported (want F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K or Q4_0)", dtype)
	}
	ts := tensors(s)
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ts[b].rows*ts[b].cols, ts[a].rows*ts[a].cols) })

	errs := make([]error, len(ts))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(ts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(order) {
					return
				}
				i := order[k]
				dt := dtype
				if dtype == kernels.Q4_K && moreBits(ts[i].name, s.Layers, s.Tied) {
					dt = kernels.Q6_K
				}
				errs[i] = make1(ts[i], i, dt, seed, raw)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("synth: shape %q: %w", s.Name, err)
	}
	return ts, nil
}

// make1 draws one tensor and encodes it: a quantized matrix's bytes, and
// with raw a float32 tensor's.
func make1(t *tensor, ti int, dtype kernels.DType, seed uint64, raw bool) error {
	fill(t, ti, seed)
	if t.vec {
		if raw {
			t.raw = f32Bytes(t.f32)
		}
		return nil
	}
	var err error
	if dtype == kernels.F16 || dtype == kernels.BF16 {
		t.typ = gguf.F16
		if dtype == kernels.BF16 {
			t.typ = gguf.BF16
		}
		t.raw = halfBytes(t.f32, dtype == kernels.BF16)
		t.f32 = nil
		return nil
	}
	if (dtype == kernels.Q5_K || dtype == kernels.Q4_0) && t.rows%8 == 0 && t.cols%kernels.QKBlockSize == 0 {
		// (Rows a multiple of 8: the kernels keep these types' bits
		// only in groups of eight rows.)
		t.typ = gguf.Q5_K
		encode := kernels.EncodeQ5K
		if dtype == kernels.Q4_0 {
			t.typ, encode = gguf.Q4_0, kernels.EncodeQ40
		}
		if t.raw, err = encode(t.rows, t.cols, t.f32); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		t.f32 = nil
		return nil
	}
	if (dtype == kernels.Q4_K || dtype == kernels.Q6_K) && t.cols%kernels.QKBlockSize == 0 {
		t.typ = gguf.Q4_K
		encode := kernels.EncodeQ4K
		if dtype == kernels.Q6_K {
			t.typ, encode = gguf.Q6_K, kernels.EncodeQ6K
		}
		if t.raw, err = encode(t.rows, t.cols, t.f32); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		t.f32 = nil
		return nil
	}
	if dtype != kernels.F32 && t.quantizable() {
		t.typ = gguf.Q8_0
		if t.raw, err = kernels.EncodeQ8(t.rows, t.cols, t.f32); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		t.f32 = nil
		return nil
	}
	t.typ = gguf.F32
	if raw {
		// Only the bytes are needed: GGUF writing does not build a model.
		t.raw, t.f32 = f32Bytes(t.f32), nil
	}
	return nil
}

// matrix returns t as a model's tensor: its float32 values in place, or
// its encoded bytes.
func (t *tensor) matrix() (*model.Tensor, error) {
	if t.typ == gguf.F32 {
		return model.NewF32Tensor(t.rows, t.cols, t.f32)
	}
	return &model.Tensor{Type: t.typ, Rows: t.rows, Cols: t.cols, Data: t.raw}, nil
}

// moreBits reports whether llama.cpp's Q4_K_M stores the tensor named
// name in Q6_K: the output matrix (the token embeddings where the output
// is tied to them, as in Llama-3.2-1B's files), and attn_v and ffn_down
// in the first and last eighth of the layers and every third layer
// between.
func moreBits(name string, layers int, tied bool) bool {
	name = strings.TrimSuffix(name, ".weight")
	if name == "output" || tied && name == "token_embd" {
		return true
	}
	var l int
	var rest string
	if n, _ := fmt.Sscanf(name, "blk.%d.%s", &l, &rest); n != 2 || (rest != "attn_v" && rest != "ffn_down") {
		return false
	}
	return l < layers/8 || l >= 7*layers/8 || (l-layers/8)%3 == 2
}

// halfBytes encodes x as float16 (or bfloat16, truncated) little-endian,
// as GGUF stores F16 and BF16 tensors.
func halfBytes(x []float32, bf bool) []byte {
	b := make([]byte, 2*len(x))
	for i, v := range x {
		h := kernels.FloatToHalf(v)
		if bf {
			h = uint16(math.Float32bits(v) >> 16)
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

// f32Bytes encodes x little-endian, as GGUF stores F32 tensors.
func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// Generate builds a model of the given shape with random weights drawn from
// seed, its matrices stored as dtype (kernels.F32, kernels.Q8_0 or
// kernels.Q4_K; under Q8_0 a matrix whose rows are not a multiple of 32
// long stays F32; Q4_K is llama.cpp's Q4_K_M mix, Q6_K for the output
// and some attn_v and ffn_down matrices (moreBits), Q4_K for the others,
// and a matrix whose rows are not a multiple of 256 long Q8_0, or F32 as
// under Q8_0; also kernels.Q6_K, Q5_K and Q4_0 for every matrix that has
// the type's shape (Q5_K and Q4_0 also rows a multiple of 8), the others
// as under Q4_K, and F16 and BF16 for every matrix). The
// model's tokenizer is SyntheticVocab(shape.Vocab). The same arguments
// always give the same model, the one WriteGGUF writes.
func Generate(shape Shape, dtype kernels.DType, seed uint64) (*model.Model, error) {
	ts, err := build(shape, dtype, seed, false)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*tensor, len(ts))
	for _, t := range ts {
		byName[t.name] = t
	}
	var errs []error
	w := weights(shape,
		func(name string) *model.Tensor {
			x, err := byName[name+".weight"].matrix()
			errs = append(errs, err)
			return x
		},
		func(name string) []float32 { return byName[name+".weight"].f32 })
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("synth: shape %q: %w", shape.Name, err)
	}
	vocab, err := SyntheticVocab(shape.Vocab)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.New(*vocab)
	if err != nil {
		return nil, err
	}
	mdl, err := model.New(shape.Config(), w, tok, fmt.Sprintf("synth %s %v seed %d", shape.Name, dtype, seed))
	if err != nil {
		return nil, fmt.Errorf("synth: shape %q: %w", shape.Name, err)
	}
	return mdl, nil
}
