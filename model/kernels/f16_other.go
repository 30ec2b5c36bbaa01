//go:build !amd64 || purego

package kernels

// Without amd64 assembly the F16 kernels are the pure-Go ones.

func f16LevelOf(level) level { return levelGo }

func toHalf(dst []uint16, src []float32) { toHalfGo(dst, src) }

func fromHalf(dst []float32, src []uint16) { fromHalfGo(dst, src) }
