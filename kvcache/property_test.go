package kvcache_test

import (
	"slices"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/kvcache/kvcachetest"
)

// shadowStore is the block manager with the tests' shadow storage, which
// performs the copies the pool queues, as a backend does.
type shadowStore struct{ *kvcache.Pool }

func (s shadowStore) Write(seq *kvcache.Seq, pos int, vals []float32) {
	kvcache.WriteSlot(s.Pool, seq, pos, vals)
}

func (s shadowStore) PoisonFree() { kvcache.PoisonFree(s.Pool) }

func (s shadowStore) Check(t testing.TB, live []*kvcache.Seq, want [][][]float32) {
	t.Helper()
	for i, seq := range live {
		for pos, w := range want[i] {
			if got := kvcache.ReadSlot(s.Pool, seq, pos); !slices.Equal(got, w) {
				t.Fatalf("sequence %d position %d: %v, want %v", i, pos, got, w)
			}
		}
	}
	kvcache.CheckInvariants(t, s.Pool, live)
}

func openShadow(cfg kvcache.Config) (kvcachetest.Store, error) {
	p, err := kvcache.New(cfg)
	if err != nil {
		return nil, err
	}
	return shadowStore{p}, nil
}

// TestRandomOps runs random operation sequences on random trees with random
// pool caps against the model.
func TestRandomOps(t *testing.T) {
	trials, ops := 50, 500
	if testing.Short() {
		trials = 8
	}
	hits := kvcachetest.Hits{}
	for seed := range uint64(trials) {
		kvcachetest.Run(t, kvcachetest.Rand(seed), ops, hits, openShadow)
	}
	t.Logf("%d ops: %v", trials*ops, hits)
	if few := hits.Barely(50, kvcachetest.Common...); len(few) > 0 {
		t.Errorf("some paths were barely exercised (%v): %v", few, hits)
	}
}

// FuzzOps interprets the input as an operation sequence.
func FuzzOps(f *testing.F) {
	kvcachetest.Seeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		kvcachetest.Run(t, kvcachetest.Bytes(data), 2000, kvcachetest.Hits{}, openShadow)
	})
}
