// Package kernels holds the numeric inner loops of the forward pass: matrix
// products against F32 and Q8_0 weights, RMSNorm, softmax, RoPE and the small
// vector helpers attention needs.
//
// The forward pass (package model) reads top to bottom and calls these; all
// the speed work lives here. Every kernel has a pure-Go version; faster
// versions may replace it at run time, and tests check that both agree.
package kernels
