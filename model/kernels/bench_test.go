package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// stories110M's weight shapes (rows x cols): wq/wk/wv/wo, w1/w3, w2, and
// the classifier.
var benchShapes = [][2]int{{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}}

// BenchmarkMatMul reports weight bandwidth (MB/s, from b.SetBytes with the
// matrix size: every weight is read once per call) and GFLOP/s. The
// weights stay in the caches between calls; see BenchmarkMatMulCold.
// Threads follow -cpu.
func BenchmarkMatMul(b *testing.B) {
	SetThreads(runtime.GOMAXPROCS(0))
	r := rand.New(rand.NewPCG(1, 1))
	for _, typ := range []DType{F32, Q8_0} {
		for _, s := range benchShapes {
			rows, cols := s[0], s[1]
			w := randVec(r, rows*cols)
			var m *Mat
			if typ == F32 {
				m, _ = NewF32Mat(rows, cols, w)
			} else {
				m, _ = QuantizeQ8(rows, cols, w)
			}
			for _, n := range []int{1, 4, 16, 64} {
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d", typ, rows, cols, n), func(b *testing.B) {
					x := randVec(r, n*cols)
					out := make([]float32, n*rows)
					b.SetBytes(m.Bytes())
					for b.Loop() {
						m.MatMul(out, x, n)
					}
					flops := 2 * float64(rows) * float64(cols) * float64(n) * float64(b.N)
					b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, n := range []int{64, 768, 4096} {
		x, y := randVec(r, n), randVec(r, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			var s float32
			for b.Loop() {
				s += Dot(x, y)
			}
			_ = s
		})
	}
}

func BenchmarkAxpy(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{64, 768, 4096} {
		x, y := randVec(r, n), randVec(r, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(12 * n))
			for b.Loop() {
				Axpy(1e-3, x, y)
			}
		})
	}
}

func BenchmarkSoftmax(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{256, 1024} {
		x := randVec(r, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				Softmax(x)
			}
		})
	}
}

func BenchmarkSwiGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	h0, g := randVec(r, 2048), randVec(r, 2048)
	h := make([]float32, len(h0))
	b.SetBytes(8 * 2048)
	for b.Loop() {
		copy(h, h0) // in place, repeated, h would decay into subnormals
		SwiGLU(h, g)
	}
}

func BenchmarkRMSNorm(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 6))
	x, w := randVec(r, 768), randVec(r, 768)
	out := make([]float32, 768)
	b.SetBytes(8 * 768)
	for b.Loop() {
		RMSNorm(out, x, w, 1e-5)
	}
}

// BenchmarkMatMulCold is BenchmarkMatMul with the weights coming from DRAM,
// as in a real forward pass whose weights exceed the caches: each call
// uses the next of enough copies of the matrix to overflow the L3 cache.
func BenchmarkMatMulCold(b *testing.B) { benchMatMulFootprint(b, 768<<20) }

// BenchmarkMatMulL3 is BenchmarkMatMulCold with 64 MiB of copies: more
// than L2 holds, less than this CPU's L3, as a real model's weights in a
// decode step.
func BenchmarkMatMulL3(b *testing.B) { benchMatMulFootprint(b, 64<<20) }

// benchMatMulFootprint cycles MatMul through copies of one matrix that
// take footprint bytes in all.
func benchMatMulFootprint(b *testing.B, footprint int64) {
	SetThreads(runtime.GOMAXPROCS(0))
	r := rand.New(rand.NewPCG(7, 7))
	rows, cols := 768, 2048
	w := randVec(r, rows*cols)
	for _, typ := range []DType{F32, Q8_0, Q4_K, Q6_K, Q5_K, Q4_0} {
		var mats []*Mat
		switch typ {
		case Q4_K, Q6_K, Q5_K, Q4_0:
			encode, newMat := EncodeQ4K, NewQ4KMat
			switch typ {
			case Q6_K:
				encode, newMat = EncodeQ6K, NewQ6KMat
			case Q5_K:
				encode, newMat = EncodeQ5K, NewQ5KMat
			case Q4_0:
				encode, newMat = EncodeQ40, NewQ40Mat
			}
			raw, _ := encode(rows, cols, w)
			for i := 0; i < int(footprint)/len(raw); i++ {
				m, _ := newMat(rows, cols, raw)
				mats = append(mats, m)
			}
		case F32:
			copies := int(footprint) / (4 * rows * cols)
			all := make([]float32, copies*rows*cols)
			for i := 0; i < copies; i++ {
				copy(all[i*rows*cols:], w)
				m, _ := NewF32Mat(rows, cols, all[i*rows*cols:(i+1)*rows*cols])
				mats = append(mats, m)
			}
		case Q8_0:
			m0, _ := QuantizeQ8(rows, cols, w)
			for i := int64(0); i < footprint/m0.Bytes(); i++ {
				m := *m0
				m.q8q = alignedBytes(len(m0.q8q)) // cache-line aligned, as NewQ8Mat makes them
				copy(m.q8q, m0.q8q)
				mats = append(mats, &m)
			}
		}
		for _, n := range []int{1, 2, 3, 4, 8, 16, 64} {
			b.Run(fmt.Sprintf("%v/%dx%d/n=%d", typ, rows, cols, n), func(b *testing.B) {
				x := randVec(r, n*cols)
				out := make([]float32, n*rows)
				b.SetBytes(mats[0].Bytes())
				i := 0
				for b.Loop() {
					mats[i].MatMul(out, x, n)
					i = (i + 1) % len(mats)
				}
				flops := 2 * float64(rows) * float64(cols) * float64(n) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkAttention compares one head's scores and weighted sum over 512
// cached positions (head size 64, positions 768 floats apart as in a
// stories110M KV cache) done per position with Dot/Axpy and in one
// DotStrided/AxpyStrided call.
func BenchmarkAttention(b *testing.B) {
	const dim, n, stride = 64, 512, 768
	r := rand.New(rand.NewPCG(8, 8))
	q, kv := randVec(r, dim), randVec(r, n*stride)
	att, y := make([]float32, n), make([]float32, dim)
	b.Run("Dot", func(b *testing.B) {
		for b.Loop() {
			for t := range att {
				att[t] = Dot(q, kv[t*stride:t*stride+dim])
			}
		}
	})
	b.Run("DotStrided", func(b *testing.B) {
		for b.Loop() {
			DotStrided(att, q, kv, stride)
		}
	})
	for i := range att {
		att[i] = 1.0 / n
	}
	b.Run("Axpy", func(b *testing.B) {
		for b.Loop() {
			for t, a := range att {
				Axpy(a, kv[t*stride:t*stride+dim], y)
			}
		}
	})
	b.Run("AxpyStrided", func(b *testing.B) {
		for b.Loop() {
			AxpyStrided(y, att, kv, stride)
		}
	})
}

// BenchmarkAttentionHead compares one row's attention in one layer over n
// cached positions in blocks of 16, as model.Runner does it, with the keys
// position-major (DotStrided per block: the layout before kvcache sealed
// blocks) and transposed (ScoresT per block, or ScoresTBlocks per four
// blocks). Each op runs every head of a
// 768-float KV row (12 heads of 64 or 6 of 128) so that the blocks' working
// set is a real layer's; ns/head is the metric to compare. "scores" times
// only the scores, "head" the scores, scale, softmax and the weighted sum
// of values (AxpyStrided per block). The F16 cases are the same work with
// the blocks stored as halves (ScoresTBlocksF16, AxpyStridedF16), as a KV
// cache of F16 keeps them.
func BenchmarkAttentionHead(b *testing.B) {
	const bs, kvd = 16, 768
	r := rand.New(rand.NewPCG(9, 9))
	for _, hd := range []int{64, 128} {
		heads := kvd / hd
		scale := float32(1 / math.Sqrt(float64(hd)))
		for _, n := range []int{128, 512, 2048, 4096} {
			nb := (n + bs - 1) / bs
			blocks := make([][]float32, nb) // [K, V][slot][kvd], or K as [kvd][slot]
			blocks16 := make([][]uint16, nb)
			for i := range blocks {
				blocks[i] = randVec(r, 2*bs*kvd)
				blocks16[i] = make([]uint16, 2*bs*kvd)
				ToHalf(blocks16[i], blocks[i])
			}
			q := randVec(r, kvd)
			att, y := make([]float32, n), make([]float32, hd)
			values := func(h int) {
				for i, blk := range blocks {
					cnt := min(bs, n-i*bs)
					AxpyStrided(y, att[i*bs:i*bs+cnt], blk[bs*kvd+h*hd:], kvd)
				}
			}
			valuesF16 := func(h int) {
				for i, blk := range blocks16 {
					cnt := min(bs, n-i*bs)
					AxpyStridedF16(y, att[i*bs:i*bs+cnt], blk[bs*kvd+h*hd:], kvd)
				}
			}
			runV := func(name string, scores, values func(h int)) {
				b.Run(fmt.Sprintf("hd=%d/n=%d/%s", hd, n, name), func(b *testing.B) {
					for b.Loop() {
						for h := 0; h < heads; h++ {
							scores(h)
							if values == nil {
								continue
							}
							Scale(att, scale)
							Softmax(att)
							clear(y)
							values(h)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*heads), "ns/head")
				})
			}
			run := func(name string, scores func(h int), full bool) {
				if full {
					runV(name, scores, values)
				} else {
					runV(name, scores, nil)
				}
			}
			old := func(h int) {
				for i, blk := range blocks {
					cnt := min(bs, n-i*bs)
					DotStrided(att[i*bs:i*bs+cnt], q[h*hd:(h+1)*hd], blk[h*hd:], kvd)
				}
			}
			transposed := func(h int) {
				for i, blk := range blocks {
					cnt := min(bs, n-i*bs)
					ScoresT(att[i*bs:i*bs+cnt], q[h*hd:(h+1)*hd], blk[h*hd*bs:(h+1)*hd*bs], bs)
				}
			}
			kts := make([][]float32, 0, 4)
			blocks4 := func(h int) { // as model.Runner does for a lone query
				for i := 0; i < nb; i += 4 {
					kts = kts[:0]
					for _, blk := range blocks[i:min(nb, i+4)] {
						kts = append(kts, blk[h*hd*bs:(h+1)*hd*bs])
					}
					ScoresTBlocks(att[i*bs:(i+len(kts))*bs], q[h*hd:(h+1)*hd], kts, bs)
				}
			}
			kts16 := make([][]uint16, 0, 4)
			blocks4F16 := func(h int) {
				for i := 0; i < nb; i += 4 {
					kts16 = kts16[:0]
					for _, blk := range blocks16[i:min(nb, i+4)] {
						kts16 = append(kts16, blk[h*hd*bs:(h+1)*hd*bs])
					}
					ScoresTBlocksF16(att[i*bs:(i+len(kts16))*bs], q[h*hd:(h+1)*hd], kts16, bs)
				}
			}
			run("scores/DotStrided", old, false)
			run("scores/ScoresT", transposed, false)
			run("scores/ScoresTBlocks", blocks4, false)
			run("scores/ScoresTBlocksF16", blocks4F16, false)
			run("head/DotStrided", old, true)
			run("head/ScoresTBlocks", blocks4, true)
			runV("head/ScoresTBlocksF16", blocks4F16, valuesF16)
		}
	}
}

// BenchmarkAttentionShared is attention for 16 rows (tree branches) whose
// sequences share all n cached positions, per head of 64 over a 768-float
// KV row: each row on its own (DotStrided, AxpyStrided per block, as
// model.Runner did before), and the 16 rows' queries together against each
// block (ScoresTMulti, AxpyStridedMulti), which reads every block once
// rather than 16 times; the F16 case reads the blocks as halves
// (ScoresTMultiF16, AxpyStridedMultiF16). ns/row-head is the metric.
func BenchmarkAttentionShared(b *testing.B) {
	const bs, kvd, hd, rows = 16, 768, 64, 16
	heads := kvd / hd
	r := rand.New(rand.NewPCG(10, 10))
	for _, n := range []int{128, 512, 2048} {
		nb := n / bs
		blocks := make([][]float32, nb)
		blocks16 := make([][]uint16, nb)
		for i := range blocks {
			blocks[i] = randVec(r, 2*bs*kvd)
			blocks16[i] = make([]uint16, 2*bs*kvd)
			ToHalf(blocks16[i], blocks[i])
		}
		q := make([][]float32, rows)
		att, y := make([][]float32, rows), make([][]float32, rows)
		for i := range q {
			q[i], att[i], y[i] = randVec(r, kvd), make([]float32, n), make([]float32, hd)
		}
		qs, outs, ys, as := make([][]float32, rows), make([][]float32, rows), make([][]float32, rows), make([][]float32, rows)
		run := func(name string, fn func(h int)) {
			b.Run(fmt.Sprintf("n=%d/%s", n, name), func(b *testing.B) {
				for b.Loop() {
					for h := range heads {
						fn(h)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*heads*rows), "ns/row-head")
			})
		}
		run("per-row/DotStrided", func(h int) {
			for i := range rows {
				for j, blk := range blocks {
					DotStrided(att[i][j*bs:(j+1)*bs], q[i][h*hd:(h+1)*hd], blk[h*hd:], kvd)
				}
				Softmax(att[i])
				clear(y[i])
				for j, blk := range blocks {
					AxpyStrided(y[i], att[i][j*bs:(j+1)*bs], blk[bs*kvd+h*hd:], kvd)
				}
			}
		})
		// The float32 and F16 cases: scores(h, j) and values(h, j) run
		// the kernels on block j into outs and ys.
		for _, kind := range []struct {
			name           string
			scores, values func(h, j int)
		}{
			{"ScoresTMulti",
				func(h, j int) { ScoresTMulti(outs, qs, blocks[j][h*hd*bs:(h+1)*hd*bs], bs) },
				func(h, j int) { AxpyStridedMulti(ys, as, blocks[j][bs*kvd+h*hd:], kvd) }},
			{"ScoresTMultiF16",
				func(h, j int) { ScoresTMultiF16(outs, qs, blocks16[j][h*hd*bs:(h+1)*hd*bs], bs) },
				func(h, j int) { AxpyStridedMultiF16(ys, as, blocks16[j][bs*kvd+h*hd:], kvd) }},
		} {
			run("shared/"+kind.name, func(h int) {
				for i := range rows {
					qs[i] = q[i][h*hd : (h+1)*hd]
				}
				for j := range nb {
					for i := range rows {
						outs[i] = att[i][j*bs : (j+1)*bs]
					}
					kind.scores(h, j)
				}
				for i := range rows {
					Softmax(att[i])
					clear(y[i])
				}
				for j := range nb {
					for i := range rows {
						ys[i], as[i] = y[i], att[i][j*bs:(j+1)*bs]
					}
					kind.values(h, j)
				}
			})
		}
	}
}

// BenchmarkToHalf and BenchmarkFromHalf report the conversions' speed in
// bytes of float32 per second.
func BenchmarkToHalf(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 11))
	for _, n := range []int{64, 768, 16384} {
		x, h := randVec(r, n), make([]uint16, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				ToHalf(h, x)
			}
		})
	}
}

func BenchmarkFromHalf(b *testing.B) {
	r := rand.New(rand.NewPCG(12, 12))
	for _, n := range []int{64, 768, 16384} {
		x, h := make([]float32, n), randHalves(r, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				FromHalf(x, h)
			}
		})
	}
}

func BenchmarkQuantizeQ8(b *testing.B) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, s := range [][2]int{{1, 768}, {16, 768}, {16, 2048}} {
		n, cols := s[0], s[1]
		x := randVec(r, n*cols)
		dst := make([]byte, n*q8XBytes(cols))
		b.Run(fmt.Sprintf("%dx%d", n, cols), func(b *testing.B) {
			b.SetBytes(int64(4 * n * cols))
			for b.Loop() {
				quantizeQ8Rows(dst, x, n, cols)
			}
		})
	}
}

// BenchmarkRoPE rotates one 64-wide head (stories110M, SmolLM2).
func BenchmarkRoPE(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 9))
	x, cos, sin := randVec(r, 64), make([]float32, 32), make([]float32, 32)
	for i := range cos { // a rotation: repeated, x keeps its norm
		a := r.Float64() * 6.3
		cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
	}
	for _, il := range []bool{true, false} {
		b.Run(fmt.Sprintf("interleaved=%v", il), func(b *testing.B) {
			for b.Loop() {
				RoPE(x, cos, sin, il)
			}
		})
	}
}

// BenchmarkTranspose seals a stories110M kv head's keys of a block of 16
// positions (16 x 64 halves), on every level.
func BenchmarkTranspose(b *testing.B) {
	src, dst := make([]uint16, 16*64), make([]uint16, 16*64)
	for _, l := range f32Levels() {
		b.Run(l.String(), func(b *testing.B) {
			withLevels(b, l, q8Level, func() {
				for b.Loop() {
					Transpose(dst, src, 16, 64)
				}
			})
		})
	}
}
