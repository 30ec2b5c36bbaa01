// Package tree holds the search tree of entropix-search: nodes in an arena,
// the frontier of live leaves, pruning, and export of the decision tree as
// Graphviz DOT and JSON.
//
// # Arena
//
// A Tree stores its nodes in an arena addressed by ID, an index: the root
// (ID Root, 0) stands for the prompt, with Token -1 and the prompt text; the
// prompt tokens are kept by the tree (Prompt). Add appends a node under a
// parent and sets the fields the tree owns: ID, Parent, Depth and
// CumLogProb (the parent's plus the node's LogProb), and the parent's
// Children. Nodes are only ever added, never removed, so a parent always
// has a lower ID than its children and an ID stays valid for the life of
// the tree. The arena is a list of fixed-size chunks, so appending never
// moves a node: the *Node that Node returns stays valid as the tree grows
// and the engine may keep it across Adds.
//
// A node carries the token, its decoded text, its log-probability under
// the untruncated distribution, the policy's view of the step that chose
// it (policy.Metrics, policy.Quadrant, policy.Action), the engine's score,
// and a Status: Live, Finished or Pruned, with a Reason. The tree holds no
// cache handles: PruneSubtree and Finish call back with every node they
// end, and the engine frees the KV sequence it keeps for a live leaf, so
// that a pruned branch gives its cache blocks back. Commit marks the chosen path,
// Best picks a leaf by any score, and Path, Tokens and Text read a path
// back.
//
// # Frontier
//
// Frontier orders node IDs by a priority, highest first and ties to the
// lowest ID. Branches get pruned while their leaves wait, so the frontier
// needs exact removal: it is a red-black tree from
// github.com/emirpasic/gods/v2 keyed by (priority, ID) with a map from ID
// to priority, giving O(log n) Push (insert or update), Pop and Remove and
// an ordered Items. The frontier holds IDs only; the engine keeps it and
// the tree in step (for instance by calling Remove from Walk over a pruned
// subtree).
//
// # Export
//
// WriteDOT draws the tree for Graphviz: each node is a box labelled with
// its text, entropy H and varentropy V and the action that chose it, and
// filled by quadrant (LELV green, HELV orange, LEHV blue, HEHV red,
// adaptive grey). Pruned nodes are dashed and faded, finished leaves have a
// double border, and the committed path is drawn bold. A long search is
// mostly confident greedy steps, so runs of at least DOTOptions.CollapseRuns
// greedy nodes with one child each collapse into one box that shows the
// joined text and the number of tokens; forks and leaves always stay
// visible, and a 500-token search draws as a few dozen boxes. Text is made
// printable (newlines as ⏎, other control characters and bytes that are not
// UTF-8 spelled out) and escaped for DOT, and the output is deterministic.
// WriteSVG renders it with Graphviz's dot when it is installed.
// DOTOptions.HidePruned and MaxDepth cut a big tree down.
//
// WriteHTML writes an interactive, self-contained page (viewer.html,
// embedded): the text coloured by quadrant with each token's numbers on
// hover, a strip chart of entropy and varentropy, and the tree with its
// forks opening on a click; a browser test drives it with chromedp.
//
// MarshalJSON writes every field of every node but Seq, for tools;
// UnmarshalJSON checks that the input is a well-formed tree and restores
// it: texts that are not UTF-8 keep their bytes, and floats are JSON
// numbers, the ones that are not finite written as null and read back as
// NaN.
package tree
