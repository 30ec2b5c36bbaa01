//go:build !amd64 || purego

package kernels

// Without amd64 assembly the F16 kernels are the pure-Go ones.

func f16LevelOf(level) level { return levelGo }

func toHalf(dst []uint16, src []float32) { toHalfGo(dst, src) }

func fromHalf(dst []float32, src []uint16) { fromHalfGo(dst, src) }

func scoresTF16(out, q []float32, kt []uint16, bs int) { scoresTF16Go(out, q, kt, bs) }

func scoresRowsF16(out, q []float32, k []uint16, stride int) { scoresRowsF16Go(out, q, k, stride) }

func scoresTMultiF16(out, q [][]float32, kt []uint16, bs int) {
	for i := range out {
		scoresTF16Go(out[i], q[i], kt, bs)
	}
}

func scoresTBlocksF16(out, q []float32, kt [][]uint16, bs int) {
	for b, k := range kt {
		scoresTF16Go(out[b*bs:(b+1)*bs], q, k, bs)
	}
}

func axpyStridedF16(y, a []float32, v []uint16, stride int) { axpyStridedF16Go(y, a, v, stride) }

func axpyStridedMultiF16(y, a [][]float32, v []uint16, stride int) {
	for i := range y {
		axpyStridedF16Go(y[i], a[i], v, stride)
	}
}
