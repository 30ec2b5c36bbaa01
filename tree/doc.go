// Package tree holds the search tree: nodes in an arena, the frontier of live
// leaves, pruning, and export of decision trees as Graphviz DOT and JSON.
package tree
