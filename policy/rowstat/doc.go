// Package rowstat holds the reductions over one row, of logits or of a
// head's attention, that the search reads after every forward step: the
// sums behind a softmax's normalizer, entropy and varentropy
// (LogitMoments), the two largest logits (Top2), the first logit above a
// threshold (FirstAbove), whether a row is usable (Finite), the attention
// metrics' sums (AbsSum, AbsDiffSum, SurprisalSum), and the Axpy and
// Scale those metrics average heads with.
//
// They read whole rows, 128k logits wide for a Llama-3 vocabulary, once
// per branch and step, so they are vectorized: on amd64 AVX2 kernels
// (Axpy and Scale AVX-512 where the CPU has it), chosen at start-up from
// the CPU's features, and pure-Go versions under the build tag purego or
// on other architectures; tests check that every level agrees. The
// assembly is generated with avo by model/kernels/asmgen, the generator of
// the CPU backend's kernels (go generate in this directory). The package
// imports nothing of the model: the search (packages policy and engine)
// reads the backend's rows without the CPU's kernels.
package rowstat

//go:generate go -C ../../model/kernels/asmgen run . -set rowstat -out ../../../policy/rowstat/rowstat_amd64.s -stubs ../../../policy/rowstat/rowstat_stubs_amd64.go -pkg rowstat
