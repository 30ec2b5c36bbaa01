package cpu

// SetNativeQ4K turns the native Q4_K path off (false) or on for a test:
// models whose weights WeightsOf converts afterwards re-quantize them.
func SetNativeQ4K(on bool) { nativeQ4K = on }
