package engine

import (
	"context"
	"errors"
	"testing"
)

// Close closes the engine's backends once, the verifier's included, and
// a closed engine's searches fail with ErrClosed.
func TestCloseClosesBackends(t *testing.T) {
	m := loadArith(t)
	madeScripted = nil
	e, err := New(m, WithBackend("scripted"), WithMode(Greedy), WithVerifier(testVerifier(t, m)))
	if err != nil {
		t.Fatal(err)
	}
	if len(madeScripted) != 2 {
		t.Fatalf("%d backends made, want the search's and the verifier's", len(madeScripted))
	}
	runSearch(t, e, "Question: x\nAnswer:", Budget{MaxTokens: 8})
	for i := range 2 {
		if err := e.Close(); err != nil {
			t.Fatalf("Close %d: %v", i+1, err)
		}
	}
	for i, b := range madeScripted {
		if b.closes != 1 {
			t.Errorf("backend %d closed %d times, want once", i, b.closes)
		}
	}
	if res, err := e.Search(context.Background(), "Question: x\nAnswer:", Budget{MaxTokens: 8}); !errors.Is(err, ErrClosed) || res != nil {
		t.Errorf("a search on a closed engine: %v, %v", res, err)
	}
}

// Close during a search ends it with ErrClosed at its next step, frees
// its cache, then closes the backend: never while a step runs on it.
func TestCloseEndsRunningSearch(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, WithBackend("scripted"), WithMode(BeamAdaptive))
	b := lastScripted
	reached, resume := make(chan struct{}), make(chan struct{})
	e.stepHook = func(step int) error {
		if step == 5 {
			close(reached)
			<-resume // the step waits until Close has begun
		}
		return nil
	}
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome)
	go func() {
		res, err := e.Search(context.Background(), "Once upon a time", Budget{MaxTokens: 100})
		done <- outcome{res, err}
	}()
	<-reached
	closed := make(chan error)
	go func() { closed <- e.Close() }()
	for {
		e.mu.Lock()
		c := e.closed
		e.mu.Unlock()
		if c {
			break
		}
	}
	if b.closes != 0 {
		t.Fatal("the backend closed while a step was running")
	}
	close(resume)
	if o := <-done; !errors.Is(o.err, ErrClosed) || o.res != nil {
		t.Errorf("the running search returned %v, %v", o.res, o.err)
	}
	if err := <-closed; err != nil || b.closes != 1 {
		t.Errorf("Close: %v, backend closed %d times", err, b.closes)
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Errorf("%d KV blocks in use after Close", n)
	}
}
