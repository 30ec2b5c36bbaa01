package main

// genRowStat generates package rowstat's kernels: the reductions over one
// logits or attention row that the search's policy reads (logitMoments,
// top2, firstAbove, badFloats, and the attention metrics' sums), and the
// axpy and scale its attention metrics use, emitted into that package so
// that the search does not import the kernels. The axpy and scale are
// the kernels' too: they call them there (rowstat.AxpyAVX512 and the
// others), the one copy of that code.
func genRowStat() {
	for _, s := range []isa{isaAVX512, isaAVX2} {
		axpy(s)
	}
	scaleAVX512()
	logitMomentsAVX2()
	top2AVX2()
	firstAboveAVX2()
	badFloatsAVX2()
	absSumAVX2()
	absDiffSumAVX2()
	surprisalSumAVX2()
}
