package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/engine"
)

// parseEndpoints reads -endpoint: comma-separated server URLs, each
// http(s)://host[:port] with an optional path (the /v1 is added).
func parseEndpoints(s string) ([]string, error) {
	var urls []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimRight(strings.TrimSpace(f), "/")
		u, err := url.Parse(f)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("-endpoint %q: want http://host:port", f)
		}
		urls = append(urls, strings.TrimSuffix(f, "/v1")+"/v1")
	}
	return urls, nil
}

// endpointSearcher sends each search of an evaluation to one of the
// entropix-search servers at urls (round robin) with the OpenAI SDK: the
// search settings go in the "entropix" extension object, the answer comes
// back with its tokens, statistics and whether the budget cut it. A
// refused request (429 when a server's queue is full, 5xx, a dropped
// connection) is retried with backoff by the SDK. The server must serve
// the model the evaluation tokenizes with: a prompt whose token count
// differs is an error.
func endpointSearcher(urls []string) bench.Searcher {
	clients := make([]openai.Client, len(urls))
	for i, u := range urls {
		clients[i] = openai.NewClient(option.WithBaseURL(u), option.WithAPIKey("none"), option.WithMaxRetries(endpointRetries))
	}
	var next atomic.Uint64
	return func(ctx context.Context, r bench.SearchRequest) (bench.SearchResult, error) {
		i := int(next.Add(1)-1) % len(clients)
		res, err := remoteSearch(ctx, &clients[i], r)
		if err != nil {
			return res, fmt.Errorf("%s: %w", urls[i], err)
		}
		return res, nil
	}
}

// endpointRetries is how often a refused request is tried again.
var endpointRetries = 6

// extensionReply is what the server says of one choice beyond the OpenAI
// fields.
type extensionReply struct {
	Stopped string        `json:"stopped"`
	Cut     bool          `json:"cut"`
	Stats   engine.Stats  `json:"stats"`
	Tokens  []int         `json:"tokens"`
	Paths   []engine.Path `json:"paths"`
}

func remoteSearch(ctx context.Context, c *openai.Client, r bench.SearchRequest) (bench.SearchResult, error) {
	if r.Seed > math.MaxInt64 {
		return bench.SearchResult{}, fmt.Errorf("seed %d does not fit the API's int64", r.Seed)
	}
	ext := map[string]any{"mode": r.Mode.String(), "budget_rows": r.Budget.MaxRows, "max_width": r.Budget.MaxWidth, "answer": "last-number"}
	if r.Policy != nil {
		ext["policy"] = r.Policy
	}
	ext["verifier"] = r.Verifier
	opts := []option.RequestOption{option.WithJSONSet("entropix", ext)}
	var raw, text string
	if r.Chat {
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:               "default",
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(r.Prompt)},
			MaxCompletionTokens: openai.Int(int64(r.Budget.MaxTokens)),
			Seed:                openai.Int(int64(r.Seed)),
		}, opts...)
		if err != nil {
			return bench.SearchResult{}, err
		}
		if len(resp.Choices) != 1 {
			return bench.SearchResult{}, fmt.Errorf("%d choices, want 1", len(resp.Choices))
		}
		raw, text = resp.RawJSON(), resp.Choices[0].Message.Content
	} else {
		resp, err := c.Completions.New(ctx, openai.CompletionNewParams{
			Model:     "default",
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(r.Prompt)},
			MaxTokens: openai.Int(int64(r.Budget.MaxTokens)),
			Seed:      openai.Int(int64(r.Seed)),
		}, opts...)
		if err != nil {
			return bench.SearchResult{}, err
		}
		if len(resp.Choices) != 1 {
			return bench.SearchResult{}, fmt.Errorf("%d choices, want 1", len(resp.Choices))
		}
		raw, text = resp.RawJSON(), resp.Choices[0].Text
	}
	var body struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
		Entropix []extensionReply `json:"entropix"`
	}
	if err := json.Unmarshal([]byte(raw), &body); err != nil {
		return bench.SearchResult{}, fmt.Errorf("reading the response: %w", err)
	}
	if len(body.Entropix) != 1 {
		return bench.SearchResult{}, errors.New("the response has no \"entropix\" object: is the server entropix-search serve?")
	}
	if body.Usage.PromptTokens != len(r.Tokens) {
		return bench.SearchResult{}, fmt.Errorf("the server read the prompt as %d tokens, this model as %d: does it serve the same model?", body.Usage.PromptTokens, len(r.Tokens))
	}
	x := body.Entropix[0]
	res := bench.SearchResult{Text: text, Tokens: x.Tokens, Stopped: x.Stopped, Cut: x.Cut, Stats: x.Stats}
	for _, p := range x.Paths {
		res.Paths = append(res.Paths, p.Text)
	}
	return res, nil
}
