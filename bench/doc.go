// Package bench measures quality versus compute for every decoding mode, and
// the speed of the forward pass and the search.
//
// Eval runs each mode over a task's items at equal forward-row budgets
// (every mode gets the same Budget.MaxRows and MaxTokens), scores every
// output with a fresh forward pass (log-likelihood per token at
// temperature 1, whatever the mode chose), and reports repetition loops,
// distinct-2, accuracy where the task can check answers, rows, forks,
// prunes and time. Tasks plug in through Task and Item: stories (story
// openings for small models), name-recall (a synthetic check cheap enough
// for CI), GSM8K (the real test set, for capable GGUF models) and arith
// (multi-step arithmetic word problems in GSM8K's format, which a small
// trained model can learn). Accuracy comes with its 95 % Wilson interval,
// broken down by the items' groups (arith: the step count), and is set
// against the rows each mode really spent, which is how modes compare at
// equal compute.
//
// The speed measurements (MeasureSpeed and its parts) time single-stream
// decode, batched steps at 1..64 branches, prefill, fork cost, and the KV
// memory of a tree against one copy per branch, and can run llama.cpp's
// llama-bench or llama2.c on the same model for a side-by-side ratio.
package bench
