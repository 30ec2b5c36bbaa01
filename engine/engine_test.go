package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

func stories(t *testing.T) *model.Model {
	t.Helper()
	m, err := model.Load(modeltest.Path(t, modeltest.Stories260KBin), modeltest.Path(t, modeltest.Tok512))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestGreedySearch(t *testing.T) {
	m := stories(t)
	var streamed strings.Builder
	e, err := engine.New(m, engine.WithMode(engine.Greedy), engine.WithStream(func(s string) { streamed.WriteString(s) }))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Search(context.Background(), "Once upon a time", engine.Budget{MaxTokens: 60})
	if err != nil {
		t.Fatal(err)
	}
	want := ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily"
	if res.Text != want || streamed.String() != want {
		t.Fatalf("text %q, streamed %q, want %q", res.Text, streamed.String(), want)
	}
	if res.Stopped != "max-tokens" || res.Stats.Generated != 60 || res.Stats.PromptRows != 5 {
		t.Fatalf("stopped %q, stats %+v", res.Stopped, res.Stats)
	}
	// The prompt is one batch; then one row per generated token but the last.
	if res.Stats.ForwardPasses != 60 || res.Stats.Rows != 59 {
		t.Fatalf("stats %+v", res.Stats)
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d KV blocks leaked", n)
	}
}

func TestSearchBadInput(t *testing.T) {
	m := stories(t)
	e, err := engine.New(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Search(context.Background(), "", engine.Budget{MaxTokens: 5}); !errors.Is(err, engine.ErrEmptyPrompt) {
		t.Errorf("empty prompt: %v", err)
	}
	if _, err := e.Search(context.Background(), "hi", engine.Budget{}); err == nil {
		t.Error("zero budget accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := e.Search(ctx, "Once upon a time", engine.Budget{MaxTokens: 50})
	if !errors.Is(err, context.Canceled) || res == nil || res.Stopped != "canceled" {
		t.Errorf("canceled search: res %+v, err %v", res, err)
	}
	if n := e.Cache().Stats().BlocksInUse; n != 0 {
		t.Fatalf("%d KV blocks leaked", n)
	}
}
