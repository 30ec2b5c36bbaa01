package tree

import (
	"cmp"
	"iter"

	"github.com/emirpasic/gods/v2/trees/redblacktree"
)

// Frontier holds node IDs ordered by priority, highest first; equal
// priorities go to the lowest ID, so the order is deterministic. NaN ranks
// below every other priority.
//
// It is a gods v2 red-black tree keyed by (priority, ID) plus a map from ID
// to priority. Search prunes branches, so removal must be exact: Push, Pop
// and Remove each cost O(log n) and one tree node allocation per Push,
// Peek is O(log n), Len is O(1), and Items walks the tree in order in
// O(n). A binary heap with lazy deletion would save the allocation but
// would keep stale entries until they surface and make Len, Peek and Items
// filter them; the frontier of a search is small (its width), so exactness
// wins.
//
// The zero value is an empty frontier. A Frontier is not safe for
// concurrent use.
type Frontier struct {
	rb   *redblacktree.Tree[entry, struct{}]
	prio map[ID]float64
}

type entry struct {
	prio float64
	id   ID
}

// compareEntries orders higher priorities first, then lower IDs. cmp.Compare
// treats NaN as equal to itself and below everything else, a total order.
func compareEntries(a, b entry) int {
	if c := cmp.Compare(b.prio, a.prio); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// NewFrontier returns an empty frontier.
func NewFrontier() *Frontier {
	f := &Frontier{}
	f.init()
	return f
}

func (f *Frontier) init() {
	if f.rb == nil {
		f.rb = redblacktree.NewWith[entry, struct{}](compareEntries)
		f.prio = make(map[ID]float64)
	}
}

// Push adds id with priority, or moves it to priority when it is already
// there.
func (f *Frontier) Push(id ID, priority float64) {
	f.init()
	if old, ok := f.prio[id]; ok {
		f.rb.Remove(entry{old, id})
	}
	f.prio[id] = priority
	f.rb.Put(entry{priority, id}, struct{}{})
}

// Pop removes and returns the ID of highest priority and its priority; ok
// is false when the frontier is empty.
func (f *Frontier) Pop() (id ID, priority float64, ok bool) {
	id, priority, ok = f.Peek()
	if ok {
		f.rb.Remove(entry{priority, id})
		delete(f.prio, id)
	}
	return id, priority, ok
}

// Peek returns the ID of highest priority and its priority without removing
// it; ok is false when the frontier is empty.
func (f *Frontier) Peek() (id ID, priority float64, ok bool) {
	if f.rb == nil {
		return None, 0, false
	}
	n := f.rb.Left()
	if n == nil {
		return None, 0, false
	}
	return n.Key.id, n.Key.prio, true
}

// Remove removes id and reports whether it was there.
func (f *Frontier) Remove(id ID) bool {
	p, ok := f.prio[id]
	if ok {
		f.rb.Remove(entry{p, id})
		delete(f.prio, id)
	}
	return ok
}

// Priority returns the priority of id and whether id is in the frontier.
func (f *Frontier) Priority(id ID) (float64, bool) {
	p, ok := f.prio[id]
	return p, ok
}

// Len returns the number of IDs in the frontier.
func (f *Frontier) Len() int { return len(f.prio) }

// Last returns the ID of lowest priority and its priority without removing
// it; ok is false when the frontier is empty.
func (f *Frontier) Last() (id ID, priority float64, ok bool) {
	if f.rb == nil {
		return None, 0, false
	}
	n := f.rb.Right()
	if n == nil {
		return None, 0, false
	}
	return n.Key.id, n.Key.prio, true
}

// All yields the IDs and priorities from highest to lowest priority,
// stopping when yield returns false. The frontier must not change during
// the walk.
func (f *Frontier) All() iter.Seq2[ID, float64] {
	return func(yield func(ID, float64) bool) {
		if f.rb == nil {
			return
		}
		for it := f.rb.Iterator(); it.Next(); {
			if !yield(it.Key().id, it.Key().prio) {
				return
			}
		}
	}
}

// Items returns the IDs from highest to lowest priority.
func (f *Frontier) Items() []ID {
	if f.rb == nil {
		return nil
	}
	out := make([]ID, 0, f.rb.Size())
	for it := f.rb.Iterator(); it.Next(); {
		out = append(out, it.Key().id)
	}
	return out
}

// Clear removes every ID.
func (f *Frontier) Clear() {
	if f.rb != nil {
		f.rb.Clear()
	}
	clear(f.prio)
}
