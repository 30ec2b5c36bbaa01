//go:build amd64 && !purego

package kernels

// The F16 kernels run at the F32 level (f32Level) when the CPU has F16C
// (VCVTPH2PS, VCVTPS2PH), and in pure Go otherwise. The attention kernels
// share their drivers with the float32 ones (dispatch_amd64.go).

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
