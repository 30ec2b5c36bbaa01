package rowstat

// level is an implementation tier of the reductions.
type level uint8

const (
	levelGo level = iota
	levelAVX2
	levelAVX512
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

// lvl is the implementation in use, set at initialisation (dispatch_*.go);
// tests switch it to compare every implementation the CPU supports.
var lvl level

// levels lists the implementations this CPU runs, pure Go first.
func levels() []level {
	var ls []level
	for l := levelGo; l <= best; l++ {
		ls = append(ls, l)
	}
	return ls
}

// Implementation names the reductions in use: "go", "avx2" or "avx512".
func Implementation() string { return lvl.String() }
