// Package engine runs the search: one batched forward pass per step over every
// live branch, and a decoding mode's decisions on the logits.
//
// Every mode runs in the same engine with the same budget accounting
// (Budget.MaxRows counts the forward rows after the prompt), so modes
// compare at equal compute: greedy, sampling and the single-path entropix
// sampler; beam search; CoT-decoding (top-k first tokens, greedy paths,
// aggregated by the answer-span margin); self-consistency and best-of-N over
// K samples drawn in one batch; and the product, beam-adaptive, a
// best-first tree search over the points where the model doubts (see
// adaptive.go): the branches share a copy-on-write paged KV cache and
// advance together, alternatives wait on a frontier ordered by their path
// probability, and the finished paths vote on the answer.
//
// Each mode is a type behind the decoder interface (modes.go) that answers
// every choice in which modes differ: its budget defaults, the attention
// its policy reads, its noise floor, its root's policy state, whether it
// may backspace, how it ranks branches for pruning, its default answer
// reader. Adding a mode is a Mode with its name, a type and its line in
// the registry (and the command line's and the server's flag). Stop
// strings end branches inside the search, in every mode (stopstr.go).
// Settings are a search's settings as data (the policy file and the
// search's own), from which the command line, the server and calibration
// take their engine options.
//
// Searches of one Engine (a server's requests) share its forward passes
// and its KV pool, and each still gets the answer it gets alone: when the
// pool cannot hold every search's next step, the oldest search runs, the
// younger ones wait for blocks, and the youngest may be preempted (its
// blocks freed and the search run again from its prompt; see search.fit
// and Stats.Restarts).
package engine
