// Package engine runs the search: one batched forward pass per step over every
// live branch, the entropix policy per branch, forks where varentropy says a
// few distinct options compete, pruning, and the budget that bounds it all.
package engine
