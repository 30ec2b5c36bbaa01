//go:build amd64 && !purego

package rowstat

// AxpyAVX512, AxpyAVX2 and ScaleAVX512 are Axpy's and Scale's assembly
// at one level, whatever level is in use here: the CPU backend's kernels
// (model/kernels) run these, the one copy of the generated code, at the
// level they choose themselves. The caller has checked the CPU's
// features (AVX-512 F, BW, VL, DQ and BMI2; AVX2 and FMA); x is not
// empty and y is at least as long.
func AxpyAVX512(a float32, x, y []float32) { axpyAVX512(a, &x[0], &y[:len(x)][0], len(x)) }

// AxpyAVX2 is AxpyAVX512's AVX2 form.
func AxpyAVX2(a float32, x, y []float32) { axpyAVX2(a, &x[0], &y[:len(x)][0], len(x)) }

// ScaleAVX512 sets x[i] *= a (see AxpyAVX512).
func ScaleAVX512(x []float32, a float32) { scaleAVX512(&x[0], len(x), a) }
