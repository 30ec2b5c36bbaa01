package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// Misuse of the library is an error, never a panic (issue 19, defect 9).
func TestMisuseIsAnError(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	m := loadStories(t)
	if _, err := New(m, WithCacheTokens(-5)); err == nil {
		t.Error("WithCacheTokens(-5) accepted")
	}
	if _, err := New(m, nil); err != nil {
		t.Errorf("a nil option: %v", err)
	}
	e := newEngine(t, m, WithMode(Greedy))
	var nilCtx context.Context
	if _, err := e.Search(nilCtx, "Once", Budget{MaxTokens: 4}); err == nil {
		t.Error("a nil context was accepted")
	}
	if _, err := e.SearchTokens(context.Background(), "x", []int{1, 1 << 30}, Budget{MaxTokens: 4}); err == nil {
		t.Error("a token outside the vocabulary was accepted")
	}
	// After Close the weights are gone: an error, not a SIGSEGV.
	m2, err := model.Load(modeltest.Stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	e2 := newEngine(t, m2, WithMode(Greedy))
	m2.Close()
	if _, err := e2.Search(context.Background(), "Once", Budget{MaxTokens: 4}); !errors.Is(err, model.ErrClosed) {
		t.Errorf("search after Close: %v", err)
	}
	if _, err := New(m2); !errors.Is(err, model.ErrClosed) {
		t.Errorf("New after Close: %v", err)
	}
}

// One Engine used from many goroutines: the searches wait for each other
// and each gets the answer it would get alone.
func TestConcurrentSearches(t *testing.T) {
	var mu sync.Mutex
	m := loadStories(t)
	// Room for all eight searches' branches (one takes some 40 blocks);
	// TestConcurrentSearchesFullPool runs searches in a pool too small
	// for them all.
	e := newEngine(t, m, WithMode(BeamAdaptive), WithSeed(3), WithCacheTokens(1<<13))
	b := Budget{MaxTokens: 24, MaxRows: 60}
	want := runSearch(t, e, "Lily wanted to", b).Text
	var wg sync.WaitGroup
	texts := make([]string, 8)
	errs := make([]error, 8)
	for i := range texts {
		wg.Go(func() {
			res, err := e.Search(context.Background(), "Lily wanted to", b)
			if err == nil {
				texts[i] = res.Text
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range texts {
		if errs[i] != nil || texts[i] != want {
			t.Errorf("goroutine %d: %q, %v; alone: %q", i, texts[i], errs[i], want)
		}
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d blocks leaked", n)
	}
	// They ran batched: far fewer forward passes than the searches' steps.
	steps := 0
	e2 := newEngine(t, m, WithMode(Greedy))
	var wg2 sync.WaitGroup
	for range 8 {
		wg2.Go(func() {
			res, err := e2.Search(context.Background(), "Lily wanted to", Budget{MaxTokens: 30})
			if err == nil {
				mu.Lock()
				steps += res.Stats.ForwardPasses
				mu.Unlock()
			}
		})
	}
	wg2.Wait()
	if runtime.GOMAXPROCS(0) == 1 {
		return // one thread: the driver may finish a search before the next one is submitted
	}
	if passes, rows := e2.Batching(); passes >= int64(steps) || rows < int64(8*30) {
		t.Errorf("8 searches of %d steps in all ran in %d passes of %d rows", steps, passes, rows)
	} else {
		t.Logf("8 greedy searches, %d steps in all: %d forward passes, %.1f rows per pass", steps, passes, float64(rows)/float64(passes))
	}
}

// Searches that together outgrow the KV pool, each of which fits it
// alone: they wait for blocks or run again (preempted for an older one),
// and each gives the result it gives alone in the same pool, the tree
// node for node; a streamed search runs again only before it has streamed
// any text.
func TestConcurrentSearchesFullPool(t *testing.T) {
	m := loadStories(t)
	const cache = 512 // 32 blocks: beam-adaptive below takes up to 18
	opts := []Option{WithMode(BeamAdaptive), WithThresholds(forking()), WithCacheTokens(cache)}
	prompts := []string{"Lily wanted to", "Once upon a time", "Tom had a big", "The sun was", "One day, a cat", "Sam and Mia", "The little bird", "Ben saw a"}
	b := Budget{MaxTokens: 40, MaxWidth: 4}
	alone := make([]*Result, len(prompts))
	for i, p := range prompts {
		alone[i] = runSearch(t, newEngine(t, m, append(opts, WithSeed(uint64(i)))...), p, b)
	}
	var streamed strings.Builder
	e := newEngine(t, m, opts...)
	got := make([]*Result, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			o := []Option{WithSeed(uint64(i))}
			if i == len(prompts)-1 { // streamed
				o = append(o, WithStream(func(s string) { streamed.WriteString(s) }))
			}
			res, err := e.SearchWith(context.Background(), p, b, o...)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = res
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	restarts, waits := 0, 0
	for i := range prompts {
		g, a := got[i], alone[i]
		restarts += g.Stats.Restarts
		waits += g.Stats.Waits
		ja, _ := json.Marshal(a.Tree)
		jg, _ := json.Marshal(g.Tree)
		if g.Text != a.Text || g.Stopped != a.Stopped || g.Stats.Rows != a.Stats.Rows || !bytes.Equal(jg, ja) {
			t.Errorf("%q beside others: %q (%s, %d rows), alone %q (%s, %d rows)", prompts[i], g.Text, g.Stopped, g.Stats.Rows, a.Text, a.Stopped, a.Stats.Rows)
		}
		if a.Stats.Restarts != 0 || a.Stats.Waits != 0 {
			t.Errorf("%q alone: %d restarts, %d waits", prompts[i], a.Stats.Restarts, a.Stats.Waits)
		}
	}
	last := got[len(got)-1]
	if streamed.String() != last.Text {
		t.Errorf("the streamed search (%d restarts): streamed %q, its text %q", last.Stats.Restarts, streamed.String(), last.Text)
	}
	if restarts == 0 || waits == 0 {
		t.Errorf("%d restarts, %d waits: the pool was not full", restarts, waits)
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d blocks leaked", n)
	}
	t.Logf("%d searches in %d blocks: %d restarts, %d steps waited", len(prompts), cache/16, restarts, waits)
}

// WithTopProbs keeps each node's most probable tokens, in every mode, and
// does not change the search.
func TestTopProbs(t *testing.T) {
	m := loadStories(t)
	for _, mode := range Modes() {
		b := Budget{MaxTokens: 12, MaxRows: 40}
		plain := runSearch(t, newEngine(t, m, WithMode(mode), WithSeed(2)), "Once upon a time", b)
		e := newEngine(t, m, WithMode(mode), WithSeed(2), WithTopProbs(3))
		res := runSearch(t, e, "Once upon a time", b)
		if res.Text != plain.Text {
			t.Errorf("%v: with top probabilities %q, without %q", mode, res.Text, plain.Text)
		}
		for id, n := range res.Tree.All() {
			if id == 0 {
				continue
			}
			if len(n.Top) != 3 || n.Top[0].LogProb < n.Top[1].LogProb {
				t.Fatalf("%v: node %d top %+v", mode, id, n.Top)
			}
			if n.LogProb != 0 && n.LogProb > n.Top[0].LogProb+1e-9 {
				t.Fatalf("%v: node %d has log p %v above the best %v", mode, id, n.LogProb, n.Top[0].LogProb)
			}
		}
	}
	if _, err := New(m, WithTopProbs(-1)); err == nil {
		t.Error("WithTopProbs(-1) accepted")
	}
}

// Searches of different modes share one engine (SearchWith): run at once,
// their forward passes are shared, and each gives what it gives alone.
func TestMixedModesBatched(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m)
	b := Budget{MaxTokens: 24, MaxRows: 96}
	modes := Modes()
	want := make([]string, len(modes))
	for i, mode := range modes {
		want[i] = runSearch(t, newEngine(t, m, WithMode(mode), WithSeed(9)), "Lily wanted to", b).Text
	}
	var wg sync.WaitGroup
	got := make([]string, len(modes))
	steps := make([]int, len(modes))
	for i, mode := range modes {
		wg.Go(func() {
			res, err := e.SearchWith(context.Background(), "Lily wanted to", b, WithMode(mode), WithSeed(9))
			if err != nil {
				t.Error(err)
				return
			}
			got[i], steps[i] = res.Text, res.Stats.ForwardPasses
		})
	}
	wg.Wait()
	total := 0
	for i, mode := range modes {
		total += steps[i]
		if got[i] != want[i] {
			t.Errorf("%v with others: %q, alone: %q", mode, got[i], want[i])
		}
	}
	if passes, _ := e.Batching(); passes >= int64(total) {
		t.Errorf("%d searches of %d steps in all ran in %d passes: not batched", len(modes), total, passes)
	}
	if _, err := e.SearchWith(context.Background(), "x", b, WithCacheTokens(64)); err == nil {
		t.Error("a per-search cache size was accepted")
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d blocks leaked", n)
	}
}

// A long prompt is fed in chunks (so that searches batched with it keep
// decoding) and gives what one prefill gives.
func TestChunkedPrefill(t *testing.T) {
	m := loadStories(t)
	prompt := strings.Repeat("Lily and Tom went to the park to play with a ball. ", 20)
	run := func(chunk int) *Result {
		old := prefillChunk
		prefillChunk = chunk
		defer func() { prefillChunk = old }()
		return runSearch(t, newEngine(t, m, WithMode(Greedy)), prompt, Budget{MaxTokens: 20})
	}
	whole, chunked := run(1<<20), run(100)
	if chunked.Text != whole.Text || chunked.Stats.PromptRows != whole.Stats.PromptRows {
		t.Errorf("chunked prefill: %q (%d prompt rows), whole: %q (%d)", chunked.Text, chunked.Stats.PromptRows, whole.Text, whole.Stats.PromptRows)
	}
	if extra := chunked.Stats.ForwardPasses - whole.Stats.ForwardPasses; extra != (whole.Stats.PromptRows-1)/100 {
		t.Errorf("%d prompt rows in chunks of 100 took %d extra passes", whole.Stats.PromptRows, extra)
	}
}
