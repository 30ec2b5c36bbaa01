// Package ggml is a small binding of ggml, the tensor library under
// llama.cpp, loaded at run time through purego (no cgo): the functions a
// Llama or Qwen2 forward step needs (graph building, backends, buffers,
// the scheduler), and nothing else.
//
// # Loading
//
// Load opens the libraries of one folder: libggml-base (the tensors and
// the graph) and the backend registry (libggml.so, or a prebuilt
// package's libggml.v0.5.0.so / libggml.vulkan.v0.5.0.so), then asks the
// registry to load the backends it finds there (libggml-cpu-*.so, the
// best for this CPU; libggml-vulkan.so, libggml-cuda.so, ...). Each
// function is looked up in both libraries: ggml splits its symbols
// between them. A library whose ggml_version() and ggml_commit() are not
// the pinned Version and Commit is refused: a call through a mismatched
// signature would not fail, it would compute garbage.
//
// # Types
//
// A *Tensor points at ggml's own struct ggml_tensor; only its leading
// fields (type, buffer, shape and strides) are declared, for reading.
// The other handles (Context, Graph, Backend, Device, Buffer, Sched) are
// opaque addresses. ggml checks shapes with assertions that abort the
// process: callers check their shapes before they build.
//
// # Logging
//
// ggml's log goes through SetLogger's function (ggml_log_set), one call a
// line; by default warnings and errors go to standard error.
package ggml
