package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/ggml"
)

// The ggml backend in the backends subcommand: its flags, and its
// devices in the check's header.
func init() {
	graphCounts = func(b model.Backend) (bench.GraphCounts, bool) {
		gb, ok := b.(*ggml.Backend)
		if !ok {
			return bench.GraphCounts{}, false
		}
		g := gb.GraphStats()
		return bench.GraphCounts{Built: g.Built, Reused: g.Reused, BuildTime: g.BuildTime, Nodes: g.Nodes, MaxSplits: g.MaxSplits}, true
	}
	backendFlags = append(backendFlags, func(fs *flag.FlagSet) func() error {
		dir := fs.String("ggml-dir", "", "`folder` of the ggml libraries (default $ENTROPIX_GGML_DIR)")
		dev := fs.String("device", "", "the ggml backend's `device`: cpu, vulkan0, cuda0, ... (default $ENTROPIX_GGML_DEVICE, else the first GPU, else the CPU)")
		threads := fs.Int("ggml-threads", 0, "ggml-cpu's threads (0: one per core)")
		flash := fs.String("flash-attn", "", "the ggml backend's attention: on (ggml_flash_attn_ext), off, or auto (the default: on a GPU, off on the CPU device and lavapipe)")
		return func() error {
			if *threads < 0 {
				return usagef("-ggml-threads %d", *threads)
			}
			if err := ggml.CheckFlashAttn(*flash); err != nil {
				return usagef("-%v", err)
			}
			ggml.SetDefaults(ggml.Options{Dir: *dir, Device: *dev, Threads: *threads, FlashAttn: *flash})
			return nil
		}
	})
	backendInfo = append(backendInfo, func(used []string) string {
		if !slices.Contains(used, "ggml") {
			return ""
		}
		o := ggml.Defaults()
		if err := ggml.Load(o); err != nil {
			return "ggml: " + err.Error()
		}
		var ds []string
		for _, d := range ggml.Devices() {
			ds = append(ds, fmt.Sprintf("%s (%s, %.1f of %.1f GiB free)", d.Name, d.Description, float64(d.Free)/(1<<30), float64(d.Total)/(1<<30)))
		}
		dev := o.Device
		if dev == "" {
			dev = "the default (ENTROPIX_GGML_DEVICE, else the first GPU, else the CPU)"
		}
		flash := o.FlashAttn
		if flash == "" {
			flash = ggml.FlashAuto + " (on a GPU, off on the CPU device and lavapipe)"
		}
		return fmt.Sprintf("ggml devices: %s; the check's device: %s; flash attention: %s", strings.Join(ds, "; "), dev, flash)
	})
}
