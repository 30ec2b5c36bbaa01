// Command asmgen generates the amd64 assembly kernels of package kernels,
// and the row statistics of package rowstat (policy/rowstat), with avo
// (github.com/mmcloughlin/avo).
//
// It lives in its own module so that the main module does not depend on avo.
// It is run by `go generate` in model/kernels (see doc.go there) and in
// policy/rowstat, once per output file:
//
//	go -C asmgen run . -set matmul -out ../matmul_amd64.s -stubs ../matmul_stubs_amd64.go -pkg kernels
//	go -C asmgen run . -set vec -out ../vec_amd64.s -stubs ../vec_stubs_amd64.go -pkg kernels
//	go -C asmgen run . -set gemm -out ../gemm_amd64.s -stubs ../gemm_stubs_amd64.go -pkg kernels
//	go -C ../../model/kernels/asmgen run . -set rowstat -out ../../../policy/rowstat/rowstat_amd64.s -stubs ../../../policy/rowstat/rowstat_stubs_amd64.go -pkg rowstat
//
// Conventions shared by every generated function:
//   - ABI0, NOSPLIT, no Go pointers retained (//go:noescape stubs);
//   - lengths and strides are in elements unless a name says bytes;
//   - the Go caller has checked all bounds, the assembly checks nothing;
//   - every function that touches a YMM or ZMM register ends with
//     VZEROUPPER (leaving dirty upper state slows later SSE code 2-3x);
//   - functions whose name ends in AVX2 use only VEX encodings and the
//     registers X0-X15/Y0-Y15 (a test in the kernels package checks this),
//     so they run on CPUs without AVX-512.
package main

import (
	"flag"
	"fmt"
	"os"

	. "github.com/mmcloughlin/avo/build"
)

var set = flag.String("set", "", "kernel set to generate: matmul, vec, gemm or rowstat")

func main() {
	flag.Parse()
	ConstraintExpr("amd64,!purego")
	switch *set {
	case "matmul":
		genMatMul()
	case "vec":
		genVec()
	case "gemm":
		genGemm()
	case "rowstat":
		genRowStat()
	default:
		fmt.Fprintf(os.Stderr, "asmgen: unknown -set %q (want matmul, vec, gemm or rowstat)\n", *set)
		os.Exit(2)
	}
	Generate()
}
