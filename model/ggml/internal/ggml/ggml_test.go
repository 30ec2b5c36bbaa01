package ggml

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// logged holds the log lines ggml sent while the tests loaded it.
var logged struct {
	sync.Mutex
	lines []string
}

var loadOnce struct {
	sync.Once
	err error
}

// load loads the libraries named by ENTROPIX_GGML_DIR, or skips the test
// when it is not set.
func load(t testing.TB) {
	t.Helper()
	dir, err := ResolveDir("")
	if err != nil {
		// Where model/ggml/getlibs.sh puts the CPU libraries.
		d := filepath.Join(modeltest.RepoRoot(), ".ggml", "cpu")
		if _, serr := os.Stat(filepath.Join(d, "libggml-base.so")); serr != nil {
			t.Skipf("skipped: %v", err)
		}
		dir = d
	}
	loadOnce.Do(func() {
		SetLogger(func(level LogLevel, line string) {
			logged.Lock()
			logged.lines = append(logged.lines, line)
			logged.Unlock()
		})
		loadOnce.err = Load(dir)
	})
	if loadOnce.err != nil {
		t.Fatal(loadOnce.err)
	}
}

// cpuBackend starts a CPU backend of two threads.
func cpuBackend(t testing.TB) Backend {
	t.Helper()
	load(t)
	for _, d := range Devices() {
		if d.Type() == DeviceCPU {
			b, err := d.Init()
			if err != nil {
				t.Fatal(err)
			}
			if !b.SetThreads(2) {
				t.Fatal("the CPU backend has no ggml_backend_set_n_threads")
			}
			t.Cleanup(b.Free)
			return b
		}
	}
	t.Fatal("no CPU device")
	return 0
}

func TestLoad(t *testing.T) {
	load(t)
	v, c := LibVersion()
	if v != Version || c != Commit {
		t.Fatalf("version %s commit %s", v, c)
	}
	if err := Load(Loaded()); err != nil {
		t.Fatalf("loading the same folder again: %v", err)
	}
	if err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "one folder") {
		t.Fatalf("loading another folder: %v", err)
	}
	logged.Lock()
	lines := slices.Clone(logged.lines)
	logged.Unlock()
	Logf(LogInfo, "a line of %s", "ours")
	logged.Lock()
	ours := slices.Contains(logged.lines, "a line of ours")
	logged.Unlock()
	if !ours {
		t.Error("Logf did not reach the logger")
	}
	t.Logf("ggml said: %q", lines)
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "CPU") }) {
		t.Errorf("ggml's log did not come through: %q", lines)
	}
}

func TestVersionCheck(t *testing.T) {
	load(t)
	v := fns.version
	defer func() { fns.version = v }()
	fns.version = func() string { return "0.99.0" }
	err := checkVersion("/x")
	if err == nil || !strings.Contains(err.Error(), "ggml 0.99.0") || !strings.Contains(err.Error(), Version) {
		t.Fatalf("a mismatched version: %v", err)
	}
}

func TestRegistryLib(t *testing.T) {
	dir := t.TempDir()
	if _, err := registryLib(dir); err == nil {
		t.Fatal("no registry library, and no error")
	}
	for _, name := range []string{"libggml.vulkan.v0.5.0" + libExt(), "libggml-base" + libExt(), "libggml-cpu-x64" + libExt()} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := registryLib(dir); err != nil || filepath.Base(p) != "libggml.vulkan.v0.5.0"+libExt() {
		t.Fatalf("registry %s, %v", p, err)
	}
}

func TestResolveDir(t *testing.T) {
	t.Setenv(DirEnv, "")
	if _, err := ResolveDir(""); err != ErrNoLibrary {
		t.Fatalf("no folder: %v", err)
	}
	if d, _ := ResolveDir("x"); d != "x" {
		t.Fatal(d)
	}
	t.Setenv(DirEnv, "y")
	if d, _ := ResolveDir(""); d != "y" {
		t.Fatal(d)
	}
}

func TestDevices(t *testing.T) {
	b := cpuBackend(t)
	for _, d := range Devices() {
		free, total := d.Memory()
		t.Logf("%s (%v, %s, backend %s): %d of %d bytes free", d.Name(), d.Type(), d.Description(), d.Reg().Name(), free, total)
		if d.Name() == "" || d.Reg().Name() == "" {
			t.Errorf("device without a name")
		}
	}
	if b.Device().Type() != DeviceCPU || b.Name() == "" || b.BufferType().Name() == "" {
		t.Fatalf("backend %q on %v, buffer type %q", b.Name(), b.Device().Type(), b.BufferType().Name())
	}
	c := NewContext(1, 0)
	defer c.Free()
	if w := c.NewTensor(TypeF32, 4, 4).SetName("w"); !b.Device().SupportsOp(w) || w.Name() != "w" {
		t.Fatalf("the CPU refuses a 4x4 weight, or its name %q", w.Name())
	}
	if b.Device().Reg().ProcAddress("no_such_function") != 0 {
		t.Fatal("a proc address for a function that does not exist")
	}
	if TypeName(TypeQ8_0) != "q8_0" || BlockSize(TypeQ8_0) != 32 || RowSize(TypeQ8_0, 64) != 68 || RowSize(TypeF16, 3) != 6 {
		t.Fatalf("q8_0: %q, block %d, row of 64 %d bytes", TypeName(TypeQ8_0), BlockSize(TypeQ8_0), RowSize(TypeQ8_0, 64))
	}
	for _, ty := range []Type{TypeF32, TypeF16, TypeQ4_0, TypeQ8_0, TypeQ4_K, TypeQ5_K, TypeQ6_K, TypeI32, TypeI64, TypeBF16} {
		if TypeName(ty) != ty.String() {
			t.Errorf("type %d: ggml calls it %q, we %q", ty, TypeName(ty), ty.String())
		}
	}
}

// graph is one test computation: build makes tensors in c, set fills the
// inputs once they have memory, and the outputs are read back.
type graph struct {
	t      *testing.T
	be     Backend
	c      Context
	g      Graph
	inputs []*Tensor
}

func newGraph(t *testing.T, be Backend) *graph {
	c := NewContext(256, 256)
	t.Cleanup(c.Free)
	return &graph{t: t, be: be, c: c, g: c.NewGraph(256)}
}

func (g *graph) input(ty Type, ne ...int64) *Tensor {
	x := g.c.NewTensor(ty, ne...)
	x.SetInput()
	return x
}

// run allocates every tensor of the context, calls set, and computes the
// outputs on the backend.
func (g *graph) run(set func(), outs ...*Tensor) {
	for _, o := range outs {
		o.SetOutput()
		g.g.Expand(o)
	}
	buf, err := g.c.AllocTensors(g.be)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(buf.Free)
	set()
	if err := g.be.Compute(g.g); err != nil {
		g.t.Fatal(err)
	}
}

func get(t *Tensor, n int) []float32 {
	out := make([]float32, n)
	Get(t, out, 0)
	return out
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func near(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); !(d <= tol*max(1, math.Abs(float64(want[i])))) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

func TestElementwise(t *testing.T) {
	be := cpuBackend(t)
	r := rand.New(rand.NewPCG(1, 2))
	g := newGraph(t, be)
	a, b := g.input(TypeF32, 4, 3), g.input(TypeF32, 4)
	av, bv := randVec(r, 12), randVec(r, 4)
	c := g.c
	outs := []*Tensor{c.Add(a, b), c.Sub(a, b), c.Mul(a, b), c.Sqr(a), c.Log(c.Sqr(a)), c.Exp(a), c.Scale(a, 0.5), c.SiLU(a), c.SwiGLU(a, c.Add(a, b)), c.RMSNorm(a, 1e-5), c.Abs(a), c.Clamp(a, -0.25, 0.5)}
	g.run(func() { Set(a, av, 0); Set(b, bv, 0) }, outs...)
	want := make([][]float32, len(outs))
	for i := range want {
		want[i] = make([]float32, 12)
	}
	for row := range 3 {
		ss := 0.0
		for j := range 4 {
			ss += float64(av[row*4+j]) * float64(av[row*4+j])
		}
		inv := 1 / math.Sqrt(ss/4+1e-5)
		for j := range 4 {
			i := row*4 + j
			x, y := float64(av[i]), float64(bv[j])
			silu := x / (1 + math.Exp(-x))
			for k, w := range []float64{x + y, x - y, x * y, x * x, math.Log(x * x), math.Exp(x), x / 2, silu, silu * (x + y), x * inv, math.Abs(x), min(max(x, -0.25), 0.5)} {
				want[k][i] = float32(w)
			}
		}
	}
	for k, o := range outs {
		near(t, "op "+string(rune('0'+k)), get(o, 12), want[k], 1e-5)
	}
}

func TestMulMat(t *testing.T) {
	be := cpuBackend(t)
	r := rand.New(rand.NewPCG(3, 4))
	const K, M, N = 64, 3, 2
	g := newGraph(t, be)
	// Grouped: a has 2 slices, b 4; b's slice i meets a's slice i/2.
	a, b := g.input(TypeF32, K, M, 2), g.input(TypeF32, K, N, 4)
	av, bv := randVec(r, K*M*2), randVec(r, K*N*4)
	// Q8_0 weights: their products quantize b to Q8_0 as well.
	q := g.input(TypeQ8_0, K, M)
	qw := randVec(r, K*M)
	raw, err := kernels.EncodeQ8(M, K, qw)
	if err != nil {
		t.Fatal(err)
	}
	f16 := g.input(TypeF16, K, M)
	h := make([]uint16, K*M)
	kernels.ToHalf(h, av[:K*M])
	prod, qprod, hprod := g.c.MulMat(a, b), g.c.MulMat(q, g.c.View2D(b, K, N, K*4, 0)), g.c.MulMat(f16, g.c.View2D(b, K, N, K*4, 0))
	if q.Bytes() != len(raw) || f16.Bytes() != 2*K*M {
		t.Fatalf("Bytes: q8_0 %d (want %d), f16 %d", q.Bytes(), len(raw), f16.Bytes())
	}
	g.run(func() { Set(a, av, 0); Set(b, bv, 0); Set(q, raw, 0); Set(f16, h, 0) }, prod, qprod, hprod)
	if prod.Ne != [4]int64{M, N, 4, 1} {
		t.Fatalf("product shape %v", prod.Ne)
	}
	want := make([]float32, M*N*4)
	for s := range 4 {
		for n := range N {
			for m := range M {
				sum := 0.0
				for k := range K {
					sum += float64(av[(s/2)*K*M+m*K+k]) * float64(bv[s*K*N+n*K+k])
				}
				want[s*M*N+n*M+m] = float32(sum)
			}
		}
	}
	near(t, "f32 product", get(prod, M*N*4), want, 1e-5)
	// ggml-cpu quantizes b's rows to Q8_0 (scale amax/127 rounded to
	// f16) and sums int8 products per block of 32; F16 weights meet b
	// rounded to f16.
	xq, err := kernels.EncodeQ8(N, K, bv[:N*K])
	if err != nil {
		t.Fatal(err)
	}
	block := func(raw []byte, r, b int) (float64, []byte) {
		blk := raw[(r*K/32+b)*34:][:34]
		return float64(kernels.HalfToFloat(uint16(blk[0]) | uint16(blk[1])<<8)), blk[2:]
	}
	wq, wh := make([]float32, M*N), make([]float32, M*N)
	for n := range N {
		for m := range M {
			sq, sh := 0.0, 0.0
			for b := range K / 32 {
				dw, qw := block(raw, m, b)
				dx, qx := block(xq, n, b)
				isum := 0
				for i := range 32 {
					isum += int(int8(qw[i])) * int(int8(qx[i]))
				}
				sq += dw * dx * float64(isum)
			}
			for k := range K {
				xh := kernels.HalfToFloat(kernels.FloatToHalf(bv[n*K+k]))
				sh += float64(kernels.HalfToFloat(h[m*K+k])) * float64(xh)
			}
			wq[n*M+m], wh[n*M+m] = float32(sq), float32(sh)
		}
	}
	near(t, "q8_0 product", get(qprod, M*N), wq, 1e-5)
	near(t, "f16 product", get(hprod, M*N), wh, 1e-5)
}

func TestRows(t *testing.T) {
	be := cpuBackend(t)
	r := rand.New(rand.NewPCG(5, 6))
	g := newGraph(t, be)
	c := g.c
	a := g.input(TypeF32, 3, 5)
	av := randVec(r, 15)
	idx := g.input(TypeI32, 2)
	rows := c.GetRows(a, idx) // rows 4 and 1
	// A cache of F16 rows: rows 2 and 0 set from rows, then read back.
	cache := g.input(TypeF16, 3, 4)
	dst := g.input(TypeI64, 2)
	set := c.SetRows(cache, rows, dst)
	back := c.GetRows(set, idx2(g))
	// Copies, contiguous permutations, reshapes and views.
	h := c.Cpy(a, g.input(TypeF16, 3, 5))
	tr := c.Cont(c.Permute(a, 1, 0, 2, 3)) // [5, 3]
	rs := c.Reshape(a, 5, 3)
	rs3 := c.Cont(c.Reshape(a, 3, 1, 5))
	rs4 := c.Cont(c.Reshape(a, 3, 1, 1, 5))
	cat := c.Concat(c.View2D(a, 3, 2, 3*4, 3*3*4), c.View2D(a, 3, 1, 3*4, 0), 1) // rows 3, 4, then 0
	v1 := c.Cont(c.View1D(a, 4, 4*4))
	v2 := c.Cont(c.View2D(a, 2, 2, 3*4, 4))         // rows 0-1, columns 1-2
	v3 := c.Cont(c.View3D(a, 1, 2, 2, 6*4, 3*4, 0)) // [1, 2, 2]: a[0][0], a[2][0], a[1][0], a[3][0]
	sums, amax, top := c.SumRows(a), c.Argmax(a), c.TopK(a, 2)
	g.run(func() {
		Set(a, av, 0)
		Set(idx, []int32{4, 1}, 0)
		Set(dst, []int64{2, 0}, 0)
		Set(g.inputs[0], []int32{0, 2}, 0)
		Set(cache, make([]uint16, 12), 0)
	}, rows, back, h, tr, rs, rs3, rs4, cat, v1, v2, v3, sums, amax, top)
	near(t, "get_rows", get(rows, 6), slices.Concat(av[12:15], av[3:6]), 0)
	half := func(x []float32) []float32 {
		y := make([]float32, len(x))
		for i, v := range x {
			y[i] = kernels.HalfToFloat(kernels.FloatToHalf(v))
		}
		return y
	}
	near(t, "set_rows then get_rows", get(back, 6), half(slices.Concat(av[3:6], av[12:15])), 0)
	hb := make([]uint16, 15)
	Get(h, hb, 0)
	for i, v := range hb {
		if v != kernels.FloatToHalf(av[i]) {
			t.Fatalf("cpy to f16 [%d] = %#x, want %#x", i, v, kernels.FloatToHalf(av[i]))
		}
	}
	wantT := make([]float32, 15)
	for i := range 5 {
		for j := range 3 {
			wantT[j*5+i] = av[i*3+j]
		}
	}
	near(t, "cont(permute)", get(tr, 15), wantT, 0)
	near(t, "reshape", get(rs, 15), av, 0)
	near(t, "reshape 3d", get(rs3, 15), av, 0)
	near(t, "reshape 4d", get(rs4, 15), av, 0)
	if rs.Ne != [4]int64{5, 3, 1, 1} || rs3.Ne != [4]int64{3, 1, 5, 1} || rs4.Ne != [4]int64{3, 1, 1, 5} || rs.Nb[1] != 20 {
		t.Fatalf("reshape shapes %v %v %v, strides %v", rs.Ne, rs3.Ne, rs4.Ne, rs.Nb)
	}
	near(t, "concat", get(cat, 9), slices.Concat(av[9:15], av[0:3]), 0)
	near(t, "view 1d", get(v1, 4), av[4:8], 0)
	near(t, "view 2d", get(v2, 4), []float32{av[1], av[2], av[4], av[5]}, 0)
	near(t, "view 3d", get(v3, 4), []float32{av[0], av[6], av[3], av[9]}, 0)
	ws, wa := make([]float32, 5), make([]int32, 5)
	for i := range 5 {
		x := av[i*3 : i*3+3]
		ws[i] = x[0] + x[1] + x[2]
		wa[i] = int32(slices.Index(x, slices.Max(x)))
	}
	near(t, "sum_rows", get(sums, 5), ws, 1e-6)
	ga, gt := make([]int32, 5), make([]int32, 10)
	Get(amax, ga, 0)
	Get(top, gt, 0)
	if !slices.Equal(ga, wa) {
		t.Fatalf("argmax %v, want %v", ga, wa)
	}
	for i := range 5 {
		k := gt[i*2 : i*2+2]
		x := av[i*3 : i*3+3]
		if !slices.Contains(k, wa[i]) || k[0] == k[1] || min(x[k[0]], x[k[1]]) < slices.Min(x) {
			t.Fatalf("top 2 of %v: %v", x, k)
		}
		other := 3 - k[0] - k[1]
		if x[other] > x[k[0]] || x[other] > x[k[1]] {
			t.Fatalf("top 2 of %v: %v", x, k)
		}
	}
}

// idx2 is an I32 index input of two rows, kept in g.inputs.
func idx2(g *graph) *Tensor {
	x := g.input(TypeI32, 2)
	g.inputs = append(g.inputs, x)
	return x
}

func TestSoftMaxRope(t *testing.T) {
	be := cpuBackend(t)
	r := rand.New(rand.NewPCG(7, 8))
	g := newGraph(t, be)
	c := g.c
	const n, rows = 5, 3
	a, mask := g.input(TypeF32, n, rows, 2), g.input(TypeF32, n, rows)
	av := randVec(r, n*rows*2)
	mv := make([]float32, n*rows)
	for i := range rows {
		for j := range n {
			if j > i+1 {
				mv[i*n+j] = float32(math.Inf(-1))
			}
		}
	}
	sm := c.SoftMax(a, mask, 0.5)
	// RoPE of 2 heads of 8 at 2 positions, both styles, with factors.
	const hd = 8
	x, pos, ff := g.input(TypeF32, hd, 2, 2), g.input(TypeI32, 2), g.input(TypeF32, hd/2)
	xv, ffv := randVec(r, hd*4), []float32{1, 2, 4, 8}
	normal, neox := c.Rope(x, pos, nil, hd, RopeNormal, 0, 10000), c.Rope(x, pos, ff, hd, RopeNeoX, 0, 500)
	g.run(func() {
		Set(a, av, 0)
		Set(mask, mv, 0)
		Set(x, xv, 0)
		Set(pos, []int32{3, 17}, 0)
		Set(ff, ffv, 0)
	}, sm, normal, neox)
	want := make([]float32, n*rows*2)
	for s := range 2 {
		for i := range rows {
			row, w := av[(s*rows+i)*n:][:n], want[(s*rows+i)*n:][:n]
			sum := 0.0
			for j := range n {
				e := math.Exp(0.5*float64(row[j]) + float64(mv[i*n+j]))
				w[j], sum = float32(e), sum+e
			}
			for j := range w {
				w[j] = float32(float64(w[j]) / sum)
			}
		}
	}
	near(t, "soft_max_ext", get(sm, n*rows*2), want, 1e-6)
	rope := func(neox bool, base float64, factors []float32) []float32 {
		out := slices.Clone(xv)
		for tok, p := range []float64{3, 17} {
			for h := range 2 {
				v := out[(tok*2+h)*hd:][:hd]
				for i := range hd / 2 {
					f := math.Pow(base, -float64(2*i)/hd)
					if factors != nil {
						f /= float64(factors[i])
					}
					a, b := 2*i, 2*i+1
					if neox {
						a, b = i, i+hd/2
					}
					s, co := math.Sincos(p * f)
					x0, x1 := float64(v[a]), float64(v[b])
					v[a], v[b] = float32(x0*co-x1*s), float32(x0*s+x1*co)
				}
			}
		}
		return out
	}
	near(t, "rope normal", get(normal, hd*4), rope(false, 10000, nil), 1e-5)
	near(t, "rope neox", get(neox, hd*4), rope(true, 500, ffv), 1e-5)
}

// TestFlashAttn checks ggml_flash_attn_ext against attention written
// out: 4 query heads over 2 key heads, an F16 mask hiding some keys
// from some rows, the result's heads before its rows.
func TestFlashAttn(t *testing.T) {
	be := cpuBackend(t)
	r := rand.New(rand.NewPCG(9, 10))
	g := newGraph(t, be)
	c := g.c
	const d, rows, heads, kv, kvHeads = 8, 3, 4, 5, 2
	q, k, v := g.input(TypeF32, d, heads, rows), g.input(TypeF32, d, kv, kvHeads), g.input(TypeF32, d, kv, kvHeads)
	mask := g.input(TypeF16, kv, rows)
	qv, kvv, vv := randVec(r, d*heads*rows), randVec(r, d*kv*kvHeads), randVec(r, d*kv*kvHeads)
	mv := make([]uint16, kv*rows) // F16: 0, or 0xfc00 (-Inf) where row i must not see key j
	for i := range rows {
		for j := range kv {
			if j > i+2 {
				mv[i*kv+j] = 0xfc00
			}
		}
	}
	const scale = 0.35
	fa := AccF32(c.FlashAttn(c.Permute(q, 0, 2, 1, 3), k, v, mask, scale)) // [d, heads, rows]
	AccF32(c.MulMat(k, c.Permute(q, 0, 2, 1, 3)))                          // a product takes it too
	func() {
		defer func() {
			if recover() == nil {
				t.Error("AccF32 of an addition did not panic")
			}
		}()
		AccF32(c.Add(q, q))
	}()
	g.run(func() {
		Set(q, qv, 0)
		Set(k, kvv, 0)
		Set(v, vv, 0)
		Set(mask, mv, 0)
	}, fa)
	want := make([]float32, d*heads*rows)
	for i := range rows {
		for h := range heads {
			kh := h * kvHeads / heads
			qr := qv[(i*heads+h)*d:][:d]
			w := make([]float64, kv)
			sum := 0.0
			for j := range kv {
				if mv[i*kv+j] != 0 {
					continue
				}
				dot := 0.0
				for e := range d {
					dot += float64(qr[e]) * float64(kvv[(kh*kv+j)*d+e])
				}
				w[j] = math.Exp(scale * dot)
				sum += w[j]
			}
			out := want[(i*heads+h)*d:][:d]
			for e := range d {
				acc := 0.0
				for j := range kv {
					acc += w[j] / sum * float64(vv[(kh*kv+j)*d+e])
				}
				out[e] = float32(acc)
			}
		}
	}
	near(t, "flash_attn_ext", get(fa, d*heads*rows), want, 1e-5)
}

// TestSched runs a graph through the scheduler: reserved once for the
// larger shape, then a smaller one allocated in the same memory.
func TestSched(t *testing.T) {
	be := cpuBackend(t)
	s, err := NewSched([]Backend{be}, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	// Weights: a context of their own, allocated once.
	wc := NewContext(1, 0)
	defer wc.Free()
	w := wc.NewTensor(TypeF32, 4, 2).SetName("w")
	wbuf, err := wc.AllocTensors(be)
	if err != nil {
		t.Fatal(err)
	}
	defer wbuf.Free()
	wbuf.SetUsage(UsageWeights)
	wbuf.Clear(1)
	if wbuf.Size() < 32 {
		t.Fatalf("weights buffer of %d bytes", wbuf.Size())
	}
	cleared := make([]uint32, 8)
	Get(w, cleared, 0)
	for _, v := range cleared {
		if v != 0x01010101 {
			t.Fatalf("cleared to %#x", v)
		}
	}
	Set(w, []float32{1, 2, 3, 4, 5, 6, 7, 8}, 0)
	build := func(n int) (Context, Graph, *Tensor, *Tensor) {
		c := NewContext(8, 64)
		g := c.NewGraph(64)
		x := c.NewTensor(TypeF32, 4, int64(n))
		x.SetInput()
		y := c.MulMat(w, x)
		y.SetOutput()
		s.SetBackend(y, be)
		g.Expand(y)
		return c, g, x, y
	}
	c, g, _, _ := build(16)
	if err := s.Reserve(g); err != nil {
		t.Fatal(err)
	}
	c.Free()
	reserved := s.BufferSize(be)
	s.Reset()
	c, g, x, y := build(2)
	defer c.Free()
	if g.Nodes() != 1 {
		t.Fatalf("%d nodes", g.Nodes())
	}
	if err := s.Alloc(g); err != nil {
		t.Fatal(err)
	}
	Set(x, []float32{1, 0, 0, 1, 0, 1, 0, 0}, 0)
	if err := s.Compute(g); err != nil {
		t.Fatal(err)
	}
	near(t, "product", get(y, 4), []float32{1 + 4, 5 + 8, 2, 6}, 0)
	if s.Splits() != 1 || s.BufferSize(be) != reserved {
		t.Fatalf("%d splits; compute buffer %d bytes after %d reserved", s.Splits(), s.BufferSize(be), reserved)
	}
}

// TestStatusError checks the messages of ggml_status's values.
func TestStatusError(t *testing.T) {
	for s, want := range map[Status]string{-2: "ggml: allocation failed", -1: "ggml: computation failed", 1: "ggml: computation aborted", 7: "ggml: status 7"} {
		if got := s.Error(); got != want {
			t.Errorf("Status(%d): %q, want %q", s, got, want)
		}
	}
}
