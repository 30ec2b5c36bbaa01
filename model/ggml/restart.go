package ggml

import (
	"fmt"
	"strings"

	gg "github.com/entropix-search/entropix-search/model/ggml/internal/ggml"
)

// Restarts: on Vulkan, device memory that graphs ran on is freed only
// with the device's backend restarted before the next graph runs.
//
// ggml-vulkan binds a kernel's buffers through descriptor sets of one
// layout of 12 bindings, kept from graph to graph: a kernel writes the
// bindings it uses, and those after them keep the buffers of the kernel
// that used the set before. Vulkan lets them dangle (a binding the kernel
// does not use need not be valid), but lavapipe (Mesa 22.3, Debian 12's)
// binds every binding of a set, taking a reference on each one's buffer:
// a binding left to a buffer freed since adds to and drops a reference of
// freed memory, and lavapipe's thread frees it a second time (glibc's
// "double free or corruption", "corrupted double-linked list", or a
// segfault in libvulkan_lvp.so; valgrind shows reads of the scheduler's
// compute buffer after lavapipe's thread freed it, then its double free).
// The memory freed while a backend runs is the scheduler's, when a graph
// larger than any before grows it (ggml_gallocr frees the old buffer),
// and a store of logits rows outgrown (lazy.go). A new backend has new
// descriptor sets, none left to a freed buffer; the weights, the KV pool
// and the rows store belong to the device and stay. ggml-vulkan's own
// scratch buffers (prealloc_x, prealloc_y) grow within a graph too, but
// sit in bindings every kernel this package uses overwrites.
//
// Flash attention's scratch does not: ggml_flash_attn_ext splits a long
// span in parts on a scratch buffer (prealloc_split_k) bound at its sixth
// binding, which kernels of fewer bindings leave as it was. The scratch
// grows within a graph, at the first attention of a shape needing more
// than any before (GGML_VK_MEMORY_LOGGER=1 shows split_k 2400 -> 9600
// bytes at a fork's two-row step after single-row steps), and the sets
// later kernels of that graph take from earlier graphs may hold the old
// one (TestVulkanFlashCopies). What a graph will ask of the scratch is
// ggml-vulkan's business, so on lavapipe under flash attention the
// backend restarts before every graph: in a new backend's first graph
// each kernel has a set of its own (ggml-vulkan hands out sets in order
// from the first, graph by graph), none from an earlier graph. GPU
// drivers do not touch the bindings a kernel does not use, as Vulkan
// allows; lavapipe is the CI's Vulkan, and Debian 12's.

// isLavapipe reports whether a Vulkan device described as desc is
// lavapipe (Mesa's Vulkan on the CPU, described as "llvmpipe (LLVM ...)").
func isLavapipe(desc string) bool {
	return strings.HasPrefix(strings.ToLower(desc), "llvmpipe")
}

// freed notes that device memory earlier graphs may have used was freed:
// the next graph runs on a restarted backend.
func (b *Backend) freed() {
	if b.restartOnFree && b.ran {
		b.stale = true
	}
}

// restart replaces the device's backend (and on ggml's CPU device the
// CPU's, the same one) and the scheduler by new ones, its memory reserved
// as at the start. The last step's graph goes with them.
func (b *Backend) restart() error {
	b.dropGraph()
	b.sched.Free()
	b.sched = 0
	cpu := b.cpu == b.dev
	b.dev.Free()
	b.dev = 0
	if cpu {
		b.cpu = 0
	}
	dev, err := b.device.Init()
	if err != nil {
		b.broken = fmt.Errorf("ggml: restarting the backend on %s: %w", b.device.Name(), err)
		return b.broken
	}
	dev.SetThreads(b.threads)
	b.dev = dev
	if cpu {
		b.cpu = dev
	}
	if err := b.newSched(); err != nil {
		b.broken = fmt.Errorf("ggml: restarting the backend on %s: %w", b.device.Name(), err)
		return b.broken
	}
	b.ran, b.stale = false, false
	b.restarts++
	if err := b.reserve(); err != nil {
		b.broken = fmt.Errorf("ggml: restarting the backend on %s: %w", b.device.Name(), err)
		return b.broken
	}
	gg.Logf(gg.LogDebug, "model/ggml: restarted the backend on %s (device memory freed), graph memory %.1f MiB",
		b.device.Name(), mib(b.sched.BufferSize(b.dev)))
	return nil
}
