package ggml

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// Options choose the libraries, the device and the CPU threads of the
// backend.
type Options struct {
	// Dir is the folder of the ggml libraries; "" reads
	// $ENTROPIX_GGML_DIR.
	Dir string
	// Device names the device to run on, as ggml names it, in any case:
	// "cpu", "vulkan0", "cuda0", ... "" reads $ENTROPIX_GGML_DEVICE, and
	// when that is empty too picks the first GPU, else the CPU.
	Device string
	// Threads is ggml-cpu's threads (on the CPU device, and for the
	// operations a GPU hands back); 0: one per core.
	Threads int
	// Chunk is the most rows one graph runs: a step of more (a long
	// prompt's prefill, many prompts at once) runs as several graphs, one
	// chunk of rows after another, so that the graph's memory (the
	// attention's scores, rows x slots x heads) stays bounded; 0:
	// DefaultChunk.
	Chunk int
	// FlashAttn is whether attention runs as ggml_flash_attn_ext (one op
	// a layer, the values cached untransposed, as llama.cpp runs it on a
	// GPU) or as a product, a softmax and a product: FlashOn, FlashOff,
	// or FlashAuto ("" too): on a GPU, as llama.cpp does, but not on
	// ggml's CPU device (ggml-cpu's flash attention sums F16 values in
	// F16 in one of its paths) nor on lavapipe, Mesa's Vulkan on the CPU,
	// where it costs a restart of the backend every step (restart.go).
	FlashAttn string
}

// Options.FlashAttn's values.
const (
	FlashAuto = "auto"
	FlashOn   = "on"
	FlashOff  = "off"
)

// CheckFlashAttn reports whether s is one of Options.FlashAttn's values.
func CheckFlashAttn(s string) error {
	switch s {
	case "", FlashAuto, FlashOn, FlashOff:
		return nil
	}
	return fmt.Errorf("flash-attn %q: want %s, %s or %s", s, FlashAuto, FlashOn, FlashOff)
}

// DefaultChunk is Options.Chunk's default.
const DefaultChunk = 512

var defaults struct {
	sync.Mutex
	o Options
}

// SetDefaults sets the options model.NewBackend("ggml", ...) uses: a
// program sets them from its flags before making an engine.
func SetDefaults(o Options) {
	defaults.Lock()
	defaults.o = o
	defaults.Unlock()
}

// Defaults returns the options SetDefaults set.
func Defaults() Options {
	defaults.Lock()
	defer defaults.Unlock()
	return defaults.o
}

// SetLogger sends ggml's log to l: its debug lines at debug level, and so
// on. Without it, ggml's warnings and errors go to standard error.
func SetLogger(l zerolog.Logger) {
	gg.SetLogger(func(level gg.LogLevel, line string) {
		var e *zerolog.Event
		switch level {
		case gg.LogDebug:
			e = l.Debug()
		case gg.LogInfo:
			e = l.Info()
		case gg.LogWarn:
			e = l.Warn()
		default:
			e = l.Error()
		}
		e.Str("from", "ggml").Msg(line)
	})
}

// Load loads the ggml libraries of o.Dir (or $ENTROPIX_GGML_DIR): once a
// process; see ErrNoLibrary for when neither names a folder.
func Load(o Options) error {
	dir, err := gg.ResolveDir(o.Dir)
	if err != nil {
		return err
	}
	return gg.Load(dir)
}

// ErrNoLibrary is the error of Load when no library folder is named.
var ErrNoLibrary = gg.ErrNoLibrary

// DeviceEnv is the environment variable naming the device when
// Options.Device does not.
const DeviceEnv = "ENTROPIX_GGML_DEVICE"

// Device describes one device the loaded libraries offer.
type Device struct {
	Name, Description string
	GPU               bool // a GPU (dedicated or integrated), not the CPU
	Free, Total       uint64
}

// Devices lists the devices of the loaded libraries (Load first).
func Devices() []Device {
	var ds []Device
	for _, d := range gg.Devices() {
		free, total := d.Memory()
		t := d.Type()
		ds = append(ds, Device{Name: d.Name(), Description: d.Description(),
			GPU: t == gg.DeviceGPU || t == gg.DeviceIGPU, Free: free, Total: total})
	}
	return ds
}

// pickDevice returns the device named name (any case), or for "" the
// first GPU, else the CPU.
func pickDevice(name string) (gg.Device, error) {
	devs := gg.Devices()
	var names []string
	for _, d := range devs {
		names = append(names, strings.ToLower(d.Name()))
	}
	if name == "" {
		name = os.Getenv(DeviceEnv)
	}
	if name == "" {
		for _, d := range devs {
			if t := d.Type(); t == gg.DeviceGPU || t == gg.DeviceIGPU {
				return d, nil
			}
		}
		for _, d := range devs {
			if d.Type() == gg.DeviceCPU {
				return d, nil
			}
		}
		return 0, fmt.Errorf("ggml: no GPU and no CPU device (devices: %s)", strings.Join(names, ", "))
	}
	for _, d := range devs {
		if strings.EqualFold(d.Name(), name) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("ggml: no device %q (devices: %s)", name, strings.Join(names, ", "))
}

// cpuDevice returns the CPU device.
func cpuDevice() (gg.Device, error) {
	for _, d := range gg.Devices() {
		if d.Type() == gg.DeviceCPU {
			return d, nil
		}
	}
	return 0, fmt.Errorf("ggml: no CPU device among the loaded backends")
}

// chunk resolves Options.Chunk.
func (o Options) chunk() int {
	if o.Chunk > 0 {
		return o.Chunk
	}
	return DefaultChunk
}

// threads resolves Options.Threads.
func (o Options) threads() int {
	if o.Threads > 0 {
		return o.Threads
	}
	return runtime.NumCPU()
}
