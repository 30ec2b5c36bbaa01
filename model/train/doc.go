// Package train trains a Llama-architecture model from scratch on the CPU.
//
// The model is the one package model runs: token embedding, then per layer
// RMSNorm, grouped-query attention with interleaved-pair RoPE (llama2.c's
// layout, which llama-architecture GGUF files use), a residual add,
// RMSNorm, a SwiGLU feed-forward block and a residual add; a final RMSNorm
// and the classifier (tied to the embedding or not).
//
// As in llm.c's train_gpt2.c, the forward pass (step.go, Model.forward)
// keeps every activation the backward pass needs, and the backward pass is written out by hand, layer
// by layer in reverse, over the float32 kernels of package kernels. The
// gradients are checked against gorgonia's automatic differentiation (the
// oracle test), and the forward logits against package model's inference
// forward pass on the exported GGUF file, so that training and inference
// cannot drift apart. model.Reference is the same network's forward pass
// alone, one position at a time, the oracle of the inference backends.
//
// The optimizer is AdamW with a linear warmup and a cosine decay of the
// learning rate, and gradient clipping by global norm.
package train
