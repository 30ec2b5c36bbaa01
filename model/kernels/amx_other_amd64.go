//go:build amd64 && !linux && !purego

package kernels

// osPermitsAMX: the AMX tiles are used on Linux only (other systems give
// the permission differently, or not at all).
func osPermitsAMX() bool { return false }
