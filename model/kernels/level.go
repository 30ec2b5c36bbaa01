package kernels

// level is an implementation tier of the kernels.
type level uint8

const (
	levelGo level = iota
	levelAVX2
	levelAVX512 // for Q8_0: AVX-512 VNNI
)

func (l level) String() string {
	switch l {
	case levelAVX2:
		return "avx2"
	case levelAVX512:
		return "avx512"
	}
	return "go"
}

// The implementations in use, set at initialisation (dispatch_*.go); tests
// switch them to compare every implementation the CPU supports.
var f32Level, q8Level level

// Implementation describes the kernels in use, e.g. "f32=avx512 q8=avx512".
func Implementation() string {
	q8 := q8Level.String()
	if q8Level == levelAVX512 {
		q8 = "avx512vnni"
	}
	return "f32=" + f32Level.String() + " q8=" + q8
}
