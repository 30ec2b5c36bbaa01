//go:build linux || darwin || (freebsd && cgo)

package ggml

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

var loaded struct {
	sync.Mutex
	dir       string // the folder loaded, "" before
	base, reg uintptr
}

// Load opens the ggml libraries in dir (see the package documentation),
// checks their version, binds the functions and loads the backends found
// there. A process loads one folder: Load again with the same folder does
// nothing, with another fails.
func Load(dir string) error {
	if dir == "" {
		return errors.New("ggml: no library folder given")
	}
	if unsafe.Sizeof(uintptr(0)) != 8 {
		return errors.New("ggml: the ggml backend needs a 64-bit platform")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("ggml: %w", err)
	}
	loaded.Lock()
	defer loaded.Unlock()
	if loaded.dir != "" {
		if loaded.dir != abs {
			return fmt.Errorf("ggml: the libraries of %s are loaded; a process uses one folder (asked for %s)", loaded.dir, abs)
		}
		return nil
	}
	basePath := filepath.Join(abs, "libggml-base"+libExt())
	if !fileExists(basePath) {
		return fmt.Errorf("ggml: no libggml-base%s in %s", libExt(), abs)
	}
	regPath, err := registryLib(abs)
	if err != nil {
		return err
	}
	// The base first, by path: the registry library needs it by name.
	base, err := purego.Dlopen(basePath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("ggml: loading %s: %w", basePath, err)
	}
	reg, err := purego.Dlopen(regPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("ggml: loading %s: %w", regPath, err)
	}
	if err := bind(base, reg); err != nil {
		return fmt.Errorf("ggml: %s: %w", abs, err)
	}
	if err := checkVersion(abs); err != nil {
		return err
	}
	installLog()
	fns.loadAllFromPath(abs)
	if len(Devices()) == 0 {
		return fmt.Errorf("ggml: no backend found in %s (want libggml-cpu*%s and others beside the registry)", abs, libExt())
	}
	loaded.dir, loaded.base, loaded.reg = abs, base, reg
	return nil
}

// Loaded returns the folder Load loaded, or "".
func Loaded() string {
	loaded.Lock()
	defer loaded.Unlock()
	return loaded.dir
}

// bind looks every function of fns up, in the base library and then the
// registry, and binds it.
func bind(base, reg uintptr) error {
	v := reflect.ValueOf(&fns).Elem()
	t := v.Type()
	var missing []string
	for i := range t.NumField() {
		name := t.Field(i).Tag.Get("sym")
		sym, err := purego.Dlsym(base, name)
		if err != nil || sym == 0 {
			sym, err = purego.Dlsym(reg, name)
		}
		if err != nil || sym == 0 {
			missing = append(missing, name)
			continue
		}
		f := v.Field(i)
		// The fields are unexported: set or bind through their address.
		fp := reflect.NewAt(f.Type(), f.Addr().UnsafePointer())
		if f.Kind() == reflect.Uintptr {
			fp.Elem().SetUint(uint64(sym))
			continue
		}
		purego.RegisterFunc(fp.Interface(), sym)
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing functions %s: not the pinned ggml", strings.Join(missing, ", "))
	}
	return nil
}

// call calls the C function at fn with integer and pointer arguments,
// and returns its integer or pointer result.
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// setThreads calls a CPU backend's ggml_backend_set_n_threads at p.
func setThreads(p uintptr, b Backend, n int) {
	purego.SyscallN(p, uintptr(b), uintptr(n))
}

var logOnce sync.Once

// installLog routes ggml's log to logLine (once: a callback is never
// released).
func installLog() {
	logOnce.Do(func() {
		cb := purego.NewCallback(func(level int32, text *byte, _ uintptr) uintptr {
			logText(LogLevel(level), goString(text))
			return 0
		})
		fns.logSet(cb, 0)
	})
}
