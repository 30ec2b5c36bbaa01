//go:build amd64 && !purego

package kernels

// The F16 kernels run at the F32 level (f32Level) when the CPU has F16C
// (VCVTPH2PS, VCVTPS2PH), and in pure Go otherwise. AVX-512 has the
// multi-query and multi-block kernels; AVX2 loops over the single ones,
// as the float32 kernels do.

// f16LevelOf is the implementation of the F16 kernels while the float32
// ones run at l.
func f16LevelOf(l level) level {
	if !hasF16C {
		return levelGo
	}
	return l
}

func toHalf(dst []uint16, src []float32) {
	switch f16LevelOf(f32Level) {
	case levelAVX512:
		toHalfAVX512(&dst[0], &src[0], len(src))
	case levelAVX2:
		toHalfAVX2(&dst[0], &src[0], len(src))
	default:
		toHalfGo(dst, src)
	}
}

func fromHalf(dst []float32, src []uint16) {
	switch f16LevelOf(f32Level) {
	case levelAVX512:
		fromHalfAVX512(&dst[0], &src[0], len(src))
	case levelAVX2:
		fromHalfAVX2(&dst[0], &src[0], len(src))
	default:
		fromHalfGo(dst, src)
	}
}

func scoresTF16(out, q []float32, kt []uint16, bs int) {
	switch f16LevelOf(f32Level) {
	case levelAVX512:
		op, qp := [4]*float32{&out[0]}, [4]*float32{&q[0]}
		scoresTF16N1AVX512(&op, &qp, &kt[0], len(q), bs, len(out))
	case levelAVX2:
		scoresTF16AVX2(&out[0], &q[0], &kt[0], len(q), bs, len(out))
	default:
		scoresTF16Go(out, q, kt, bs)
	}
}

func scoresRowsF16(out, q []float32, k []uint16, stride int) {
	switch f16LevelOf(f32Level) {
	case levelAVX512:
		scoresRowsF16AVX512(&out[0], &q[0], &k[0], len(q), stride, len(out))
	case levelAVX2:
		scoresRowsF16AVX2(&out[0], &q[0], &k[0], len(q), stride, len(out))
	default:
		scoresRowsF16Go(out, q, k, stride)
	}
}

func scoresTMultiF16(out, q [][]float32, kt []uint16, bs int) {
	if f16LevelOf(f32Level) != levelAVX512 {
		for i := range out {
			scoresTF16(out[i], q[i], kt, bs)
		}
		return
	}
	dim, n := len(q[0]), len(out[0])
	var op, qp [4]*float32
	for i := 0; i < len(out); i += 4 {
		m := min(4, len(out)-i)
		for j := range m {
			op[j], qp[j] = &out[i+j][0], &q[i+j][0]
		}
		switch m { // direct calls: through a func value the arrays would escape
		case 1:
			scoresTF16N1AVX512(&op, &qp, &kt[0], dim, bs, n)
		case 2:
			scoresTF16N2AVX512(&op, &qp, &kt[0], dim, bs, n)
		case 3:
			scoresTF16N3AVX512(&op, &qp, &kt[0], dim, bs, n)
		default:
			scoresTF16N4AVX512(&op, &qp, &kt[0], dim, bs, n)
		}
	}
}

func scoresTBlocksF16(out, q []float32, kt [][]uint16, bs int) {
	if f16LevelOf(f32Level) != levelAVX512 {
		for b, k := range kt {
			scoresTF16(out[b*bs:(b+1)*bs], q, k, bs)
		}
		return
	}
	var kp [4]*uint16
	for b := 0; b < len(kt); b += 4 {
		m := min(4, len(kt)-b)
		for j := range m {
			kp[j] = &kt[b+j][0]
		}
		o := &out[b*bs]
		switch m {
		case 1:
			op, qp := [4]*float32{o}, [4]*float32{&q[0]}
			scoresTF16N1AVX512(&op, &qp, kp[0], len(q), bs, bs)
		case 2:
			scoresTF16B2AVX512(o, &q[0], &kp, len(q), bs)
		case 3:
			scoresTF16B3AVX512(o, &q[0], &kp, len(q), bs)
		default:
			scoresTF16B4AVX512(o, &q[0], &kp, len(q), bs)
		}
	}
}

// axpyStridedF16 keeps y in registers at both levels: every element of y
// is still one chain of multiply-adds in t order, as AxpyStrided's axpy
// per value gives.
func axpyStridedF16(y, a []float32, v []uint16, stride int) {
	switch f16LevelOf(f32Level) {
	case levelAVX512:
		yp, ap := [4]*float32{&y[0]}, [4]*float32{&a[0]}
		axpyStridedF16N1AVX512(&yp, &ap, &v[0], len(y), stride, len(a))
	case levelAVX2:
		axpyStridedF16AVX2(&y[0], &a[0], &v[0], len(y), stride, len(a))
	default:
		axpyStridedF16Go(y, a, v, stride)
	}
}

func axpyStridedMultiF16(y, a [][]float32, v []uint16, stride int) {
	if f16LevelOf(f32Level) != levelAVX512 {
		for i := range y {
			axpyStridedF16(y[i], a[i], v, stride)
		}
		return
	}
	dim, n := len(y[0]), len(a[0])
	var yp, ap [4]*float32
	for i := 0; i < len(y); i += 4 {
		m := min(4, len(y)-i)
		for j := range m {
			yp[j], ap[j] = &y[i+j][0], &a[i+j][0]
		}
		switch m {
		case 1:
			axpyStridedF16N1AVX512(&yp, &ap, &v[0], dim, stride, n)
		case 2:
			axpyStridedF16N2AVX512(&yp, &ap, &v[0], dim, stride, n)
		case 3:
			axpyStridedF16N3AVX512(&yp, &ap, &v[0], dim, stride, n)
		default:
			axpyStridedF16N4AVX512(&yp, &ap, &v[0], dim, stride, n)
		}
	}
}
