//go:build !linux

package kernels

// mapWeightChunk maps nothing where huge pages are not known: chunks are
// Go memory.
func mapWeightChunk(int) *weightChunk { return nil }

func releaseMapped([]byte) {}

func hugePagesOn() bool { return false }
