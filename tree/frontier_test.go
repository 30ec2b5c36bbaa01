package tree

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestFrontierOrder(t *testing.T) {
	f := NewFrontier()
	if _, _, ok := f.Pop(); ok {
		t.Fatal("Pop of an empty frontier succeeded")
	}
	f.Push(5, -1)
	f.Push(3, 2)
	f.Push(9, 2) // ties go to the lower ID
	f.Push(1, math.NaN())
	f.Push(7, math.Inf(-1))
	if got, want := f.Items(), []ID{3, 9, 5, 7, 1}; !slices.Equal(got, want) {
		t.Fatalf("Items = %v, want %v", got, want)
	}
	if id, _, ok := f.Last(); !ok || id != 1 {
		t.Fatalf("Last = %d %v", id, ok)
	}
	var walked []ID
	for id := range f.All() {
		walked = append(walked, id)
		if len(walked) == 3 {
			break
		}
	}
	if !slices.Equal(walked, []ID{3, 9, 5}) {
		t.Fatalf("All, first three: %v", walked)
	}
	if id, p, ok := f.Peek(); !ok || id != 3 || p != 2 || f.Len() != 5 {
		t.Fatalf("Peek = %d %v %v, Len %d", id, p, ok, f.Len())
	}
	f.Push(5, 10) // update
	if f.Len() != 5 {
		t.Fatalf("update changed Len to %d", f.Len())
	}
	if !f.Remove(9) || f.Remove(9) || f.Remove(42) {
		t.Fatal("Remove should report presence exactly once")
	}
	if p, ok := f.Priority(5); !ok || p != 10 {
		t.Errorf("Priority(5) = %v, %v", p, ok)
	}
	var got []ID
	for f.Len() > 0 {
		id, _, ok := f.Pop()
		if !ok {
			t.Fatal("Pop failed with Len > 0")
		}
		got = append(got, id)
	}
	if want := []ID{5, 3, 7, 1}; !slices.Equal(got, want) {
		t.Errorf("pop order = %v, want %v", got, want)
	}
	f.Push(1, 1)
	f.Clear()
	if f.Len() != 0 || len(f.Items()) != 0 {
		t.Error("Clear left items")
	}
}

func TestFrontierZeroValue(t *testing.T) {
	var f Frontier
	if _, _, ok := f.Peek(); ok || f.Len() != 0 || f.Items() != nil || f.Remove(1) {
		t.Fatal("zero Frontier is not empty")
	}
	f.Clear()
	f.Push(2, 1)
	if id, _, ok := f.Pop(); !ok || id != 2 {
		t.Errorf("Pop = %d, %v", id, ok)
	}
}

// TestFrontierRandom checks pushes, updates, removals and pops against a
// sorted slice.
func TestFrontierRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := NewFrontier()
	ref := map[ID]float64{}
	sorted := func() []ID {
		ids := make([]ID, 0, len(ref))
		for id := range ref {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b ID) int { return compareEntries(entry{ref[a], a}, entry{ref[b], b}) })
		return ids
	}
	for i := range 5000 {
		id := ID(rng.IntN(200))
		switch op := rng.IntN(10); {
		case op < 5:
			p := float64(rng.IntN(50)) // many ties
			f.Push(id, p)
			ref[id] = p
		case op < 7:
			_, had := ref[id]
			if f.Remove(id) != had {
				t.Fatalf("op %d: Remove(%d) disagrees", i, id)
			}
			delete(ref, id)
		default:
			want := sorted()
			got, p, ok := f.Pop()
			if ok != (len(want) > 0) || (ok && (got != want[0] || p != ref[want[0]])) {
				t.Fatalf("op %d: Pop = %d %v %v, want %v", i, got, p, ok, want[:min(1, len(want))])
			}
			delete(ref, got)
		}
		if f.Len() != len(ref) {
			t.Fatalf("op %d: Len = %d, want %d", i, f.Len(), len(ref))
		}
	}
	if got, want := f.Items(), sorted(); !slices.Equal(got, want) {
		t.Errorf("Items = %v, want %v", got, want)
	}
	if !slices.IsSortedFunc(f.Items(), func(a, b ID) int {
		pa, _ := f.Priority(a)
		pb, _ := f.Priority(b)
		return cmp.Compare(pb, pa)
	}) {
		t.Error("Items not by descending priority")
	}
}

func BenchmarkFrontierPushPop(b *testing.B) {
	f := NewFrontier()
	for i := range 64 {
		f.Push(ID(i), float64(i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id, p, _ := f.Pop()
		f.Push(id, p-float64(i%7))
	}
}
