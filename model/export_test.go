package model

// SetNativeQ4K turns the native Q4_K path off (false) or on for a test.
func SetNativeQ4K(on bool) { nativeQ4K = on }
