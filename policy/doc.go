// Package policy is the entropix decision layer of entropix-search: pure
// functions and small values over one row of logits (and, optionally, the
// attention of the same step) that say how uncertain the model is and what
// to do about it. It imports nothing of the model or the engine, so both
// can use it.
//
// # Signals
//
// From the logits at temperature 1, before any truncation, with
// p = softmax(logits):
//
//   - entropy H = -Σ p log2 p (bits): how spread the next-token
//     distribution is;
//   - varentropy V = Σ p (log2 p + H)² (bits²), the variance of the
//     surprisal: whether the spread is uniform (low V) or a few options
//     stand apart from a tail (high V).
//
// LogitEntropy computes both in two reads of the row (the maximum, then one
// exp per token accumulating in float64), allocating nothing.
// LogitEntropyFloor first drops tokens under a noise floor (NoiseFloor gives
// the bf16 one, 2⁻⁷/√vocab). MeasureMoments takes them, with the normalizer,
// argmax and margin, from the row's sums computed where the row lives (a GPU
// backend's), and Decide then reads the row only where a decision needs it.
//
// From the attention of the last query position (Attention: per head, the
// scores q·k/√d and their softmax over the positions 0..pos the sequence
// really has): the mean over heads of the attention entropy, its variance
// across heads (attention varentropy), the agreement between heads (mean
// absolute deviation from the head-mean pattern) and the interaction
// strength (mean |score|). The engine feeds the last layer only, as the
// reference did: the reference's coefficients were tuned on the last layer,
// which is also the one closest to the next-token choice. MeasureAttention
// accepts several layers and averages each metric over them, for
// experiments.
//
// # Quadrants
//
// Thresholds split the (H, V) plane; the first match wins:
//
//	LELV  low H, low V     confident            argmax
//	HELV  high H, low V    uniformly unsure     insert a clarify text ("Wait,"), then sample hotter
//	LEHV  low H, high V    a few distinct options   an adjusted sample
//	HEHV  high H, high V   lost                 a hot resample
//	otherwise              adaptive             best of n draws with adapted T, top-k, top-p, min-p
//
// (that is the single-path sampler; Search mode, below, branches instead).
//
// EntropixV1 holds the reference constants; other presets come from later
// entropix versions. Thresholds depend on the model: Calibrate derives them
// from the model's own (H, V) observations so that each quadrant gets a
// chosen share of steps, and WriteThresholds/ReadThresholds keep them as
// JSON.
//
// # Deciding
//
// Decider is the per-branch state of the policy (generator, penalty history,
// clarify cooldown, backspace count, scratch); Decider.Decide turns one Step
// into a Decision that carries its reason (quadrant, metrics, parameters,
// score). In Search mode nothing is sampled: a tree search explores by
// branching. LELV takes the argmax; any other row whose Fork set (p >=
// min_p·p_max, min_p sliding with V, at most the width and budget allow)
// holds two tokens or more is a Branch decision; HELV may insert the
// clarify text; HEHV right after an uncertain token (p below
// Config.BackspaceBelow) is a Backspace decision; every other row takes
// the argmax. The engine forks with Decider.Clone or Decider.Split.
//
// A File holds the whole policy (Config, the score, the clarify text) as
// JSON; CalibrateSearch fits its thresholds (quadrants, fork cut and
// varentropy range, backspace bound) to Observations of the search's own
// rows.
//
// The samplers (Temperature, TopK, TopP, MinP, Penalties, ArgMax, Dist,
// Chain) are composable stages over Candidates in the llama.cpp manner,
// each with Apply, Accept, Reset and Clone. Top-k and top-p select in
// expected linear time instead of sorting the vocabulary.
//
// PathScore aggregates along a path the log-probability, the entropix
// confidence C of each step, the CoT-decoding margin p(top1) - p(top2) and
// DeepConf's lowest group confidence; ScoreKind picks the one the engine
// weighs paths by.
//
// # Reference bugs avoided
//
// The public entropix code (2024) has bugs this package does not repeat:
//
//  1. attention metrics over every cache slot, empty ones included, which
//     pinned the attention entropy near log2(4096): here they run over the
//     sequence's own positions only;
//  2. min-p computed but never applied: KeepMinP filters;
//  3. top-p over ascending probabilities, which removed the most probable
//     tokens: KeepTopP keeps the smallest most-probable set reaching p;
//  4. a biased draw (a uniform instead of an exponential race) with one PRNG
//     key reused every step: Draw is an exact inverse-CDF draw in float64
//     from a seeded PCG that advances with each draw;
//  5. the clarify token hard-coded as a Llama-3 id and inserted without
//     restraint: Config.Clarify holds the caller's tokenization of a text,
//     with a cooldown.
//
// (The position off by one after prefill, the reference's fifth bug, belongs
// to the engine.)
package policy
