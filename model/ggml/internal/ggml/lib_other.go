//go:build !(linux || darwin || (freebsd && cgo))

package ggml

import (
	"errors"
	"runtime"
)

// Load fails: this binding loads libraries through purego's Dlopen,
// which this platform lacks (FreeBSD has it only in cgo builds).
func Load(dir string) error {
	return errors.New("ggml: the ggml backend is not available on " + runtime.GOOS)
}

// Loaded returns "": nothing loads here.
func Loaded() string { return "" }

func setThreads(p uintptr, b Backend, n int) {}

func call(fn uintptr, args ...uintptr) uintptr { panic("ggml: not available on " + runtime.GOOS) }
