//go:build !amd64 || purego

package rowstat

// Without amd64 assembly (another architecture, or the purego build tag)
// every reduction is its Go loop.

const best = levelGo

func logitMoments(x []float32, m float32) (z, a, b float64) { return logitMomentsGo(x, m) }

func top2(x []float32) (float32, int, float32) { return top2Go(x) }

func firstAbove(x []float32, thr float32) int { return 0 }

func badFloats(x []float32, done *int) bool { return false }

func absSum(x []float32) float64                     { return absSumGo(x) }
func absDiffSum(x, y []float32) float64              { return absDiffSumGo(x, y) }
func surprisalSum(p, s []float32, c float32) float64 { return surprisalSumGo(p, s, c) }

func axpy(a float32, x, y []float32) { axpyGo(a, x, y) }

func scale(x []float32, a float32) { scaleGo(x, a) }
