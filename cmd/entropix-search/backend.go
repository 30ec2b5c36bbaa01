package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model/ggml"
)

// backendFlags choose the backend that runs the forward pass: the
// pure-Go CPU engine ("cpu", the default) or ggml ("ggml": a GPU, or
// ggml's CPU backend).
type backendFlags struct {
	name, ggmlDir, device, flash string
}

// register adds --backend, --ggml-dir and --device to fs.
func (b *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.name, "backend", "cpu", "what runs the forward pass: cpu (the built-in engine) or ggml (a GPU, or ggml's CPU backend, through the ggml libraries of --ggml-dir)")
	fs.StringVar(&b.ggmlDir, "ggml-dir", "", "folder of the ggml libraries for --backend ggml (default $ENTROPIX_GGML_DIR; model/ggml/getlibs.sh fetches them)")
	fs.StringVar(&b.device, "device", "", "the ggml device for --backend ggml: cpu, vulkan0, cuda0, ... (default $ENTROPIX_GGML_DEVICE, else the first GPU, else cpu)")
	fs.StringVar(&b.flash, "flash-attn", "", "ggml's attention for --backend ggml: on (ggml_flash_attn_ext), off, or auto (the default: on a GPU, off on the CPU device and lavapipe)")
}

// check reports a bad choice before anything loads.
func (b *backendFlags) check() error {
	switch b.name {
	case "cpu":
		if b.device != "" || b.ggmlDir != "" || b.flash != "" {
			return errors.New("--device, --ggml-dir and --flash-attn choose ggml's device, libraries and attention: give --backend ggml too")
		}
	case "ggml":
		if err := ggml.CheckFlashAttn(b.flash); err != nil {
			return fmt.Errorf("--%w", err)
		}
	default:
		return fmt.Errorf("--backend %q: want cpu or ggml", b.name)
	}
	return nil
}

// option readies the chosen backend — for ggml, its libraries loaded
// (one clear line when they are missing), its log routed to log and
// threads threads for ggml's CPU work (0: one per core) — and returns
// the engine option that selects it.
func (b *backendFlags) option(threads int, log zerolog.Logger) (engine.Option, error) {
	if b.name != "ggml" {
		return engine.WithBackend("cpu"), nil
	}
	ggml.SetLogger(log)
	o := ggml.Options{Dir: b.ggmlDir, Device: b.device, Threads: threads, FlashAttn: b.flash}
	if err := ggml.Load(o); err != nil {
		return nil, err
	}
	ggml.SetDefaults(o)
	return engine.WithBackend("ggml"), nil
}
