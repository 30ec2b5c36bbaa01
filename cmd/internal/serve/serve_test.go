package serve

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/modeltest/chatgguf"
	"github.com/entropix-search/entropix-search/policy"
)

// chatStories is the bundled stories260K with a chat template, so that
// chat requests have a model that can chat.
func chatStories(t *testing.T) string { return chatgguf.Write(t, chatgguf.RoleColon) }

// start serves path on a loopback port until the test ends.
func start(t *testing.T, path string, cfg Config) (*Server, string) { return startTB(t, path, cfg) }

func jsonDecode(resp *http.Response, v any) { json.NewDecoder(resp.Body).Decode(v) }

func startTB(t testing.TB, path string, cfg Config) (*Server, string) {
	t.Helper()
	m, err := model.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(m, engine.WithCacheTokens(1<<14))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Policy = policy.DefaultFile()
	srv := New(m, eng, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if n := eng.BlocksInUse(); n != 0 {
			t.Errorf("%d KV blocks in use after the server stopped", n)
		}
		m.Close()
	})
	return srv, "http://" + ln.Addr().String()
}

const fay = "Question: Fay has 75 eggs. She sells 67 eggs. She buys 4 bags with 9 eggs in each bag. How many eggs does Fay have now?\nAnswer:"

// The official Go SDK drives the server: completions with the extension
// object, chat with a system and a user message, streaming.
func TestOpenAISDK(t *testing.T) {
	arith := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	_, url := start(t, arith, Config{ModelName: "arith"})
	client := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("none"))
	ctx := context.Background()

	c, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     "arith",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(fay)},
		MaxTokens: openai.Int(120),
	}, option.WithJSONSet("entropix", map[string]any{"mode": "beam-adaptive", "budget_rows": 276, "return_tree": true}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || !strings.Contains(c.Choices[0].Text, "####") || c.Choices[0].FinishReason != "stop" {
		t.Errorf("completion: %+v", c.Choices)
	}
	var x struct {
		Usage struct {
			ForwardRows int `json:"forward_rows"`
		} `json:"usage"`
		Entropix []struct {
			Stopped string          `json:"stopped"`
			TreeID  string          `json:"tree_id"`
			Tree    json.RawMessage `json:"tree"`
		} `json:"entropix"`
	}
	if err := json.Unmarshal([]byte(c.RawJSON()), &x); err != nil || x.Usage.ForwardRows == 0 || x.Usage.ForwardRows > 276 || len(x.Entropix) != 1 || x.Entropix[0].TreeID == "" {
		t.Fatalf("usage and extension: %+v, %v", x, err)
	}
	if c.Usage.PromptTokens == 0 || c.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v", c.Usage)
	}
	// The tree is served for a while, as JSON and as the viewer.
	for _, format := range []string{"json", "html", "dot"} {
		resp, err := http.Get(url + "/v1/trees/" + x.Entropix[0].TreeID + "?format=" + format)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("tree as %s: %v %v", format, resp.Status, err)
		}
		resp.Body.Close()
	}

	// Greedy, through the extension object, and n = 3 choices.
	c, err = client.Completions.New(ctx, openai.CompletionNewParams{
		Model: "arith", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(fay)}, MaxTokens: openai.Int(100), N: openai.Int(3),
	}, option.WithJSONSet("entropix", map[string]any{"mode": "greedy"}))
	if err != nil || len(c.Choices) != 3 || c.Choices[0].Text != c.Choices[2].Text {
		t.Fatalf("n=3 greedy: %v, %+v", err, c)
	}

	// Streaming: the pieces make the text, the last chunk says why it ended.
	stream := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model: "arith", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(fay)}, MaxTokens: openai.Int(100),
	}, option.WithJSONSet("entropix", map[string]any{"mode": "greedy"}))
	var text strings.Builder
	reason := ""
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		chunks++
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Text)
			if ch.Choices[0].FinishReason != "" {
				reason = string(ch.Choices[0].FinishReason)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != c.Choices[0].Text || reason != "stop" || chunks < 10 {
		t.Errorf("streamed %q (%d chunks, %q), want %q", text.String(), chunks, reason, c.Choices[0].Text)
	}
}

func TestOpenAISDKChat(t *testing.T) {
	_, url := start(t, chatStories(t), Config{ModelName: "stories"})
	client := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("none"))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:     "stories",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You tell stories."), openai.UserMessage("Once upon a time")},
		MaxTokens: openai.Int(24),
	}
	r, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Choices) != 1 || r.Choices[0].Message.Content == "" || r.Choices[0].Message.Role != "assistant" {
		t.Fatalf("chat: %+v", r.Choices)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil || text.String() != r.Choices[0].Message.Content {
		t.Errorf("streamed chat %q (%v), want %q", text.String(), err, r.Choices[0].Message.Content)
	}
}

// Bad input is a 4xx with an OpenAI-style error object, and the server
// keeps serving.
func TestBadRequests(t *testing.T) {
	srv, url := start(t, filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), Config{MaxSearches: 2, Queue: 1})
	post := func(path, body string) (int, map[string]any) {
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	for _, c := range []struct {
		path, body string
		status     int
		param      string
	}{
		{"/v1/completions", `{"prompt": "x"`, 400, ""},
		{"/v1/completions", `{"prompt": 5}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": ""}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": "x", "max_tokens": 0}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt": "x", "max_tokens": 100000}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt": "x", "max_tokens": "many"}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt": "x", "temperature": 9}`, 400, "temperature"},
		{"/v1/completions", `{"prompt": "x", "n": 99}`, 400, "n"},
		{"/v1/completions", `{"prompt": "x", "n": 2, "stream": true}`, 400, "n"},
		{"/v1/completions", `{"prompt": "x", "entropix": {"mode": "magic"}}`, 400, "entropix.mode"},
		{"/v1/completions", `{"prompt": "x", "entropix": {"policy": {"fork": {"max_width": 1}}}}`, 400, "entropix.policy"},
		{"/v1/completions", `{"prompt": "x", "stop": [1]}`, 400, "stop"},
		{"/v1/completions", `{"prompt": "` + strings.Repeat("a b ", 400) + `"}`, 400, "prompt"},
		{"/v1/chat/completions", `{"messages": []}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages": [{"role": "wizard", "content": "x"}]}`, 400, "messages[0].role"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}]}`, 400, "messages"}, // arith has no chat template
		{"/v1/nothing", `{}`, 404, ""},
	} {
		status, v := post(c.path, c.body)
		e, _ := v["error"].(map[string]any)
		if status != c.status || e == nil || e["message"] == "" || (c.param != "" && e["param"] != c.param) {
			t.Errorf("%s %.60s: %d %v, want %d with param %q", c.path, c.body, status, v, c.status, c.param)
		}
	}
	if status, _ := post("/v1/completions", `{"prompt": "`+strings.Repeat("x", maxBody)+`"}`); status != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized body: %d", status)
	}
	// A full queue: 429 with Retry-After.
	ctx := context.Background()
	if err := srv.sem.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	srv.waiting.Store(1)
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a full queue: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	srv.waiting.Store(0)
	srv.sem.Release(2)
	// And it still serves.
	if status, v := post("/v1/completions", `{"prompt": "`+strings.ReplaceAll(fay, "\n", `\n`)+`", "max_tokens": 60}`); status != 200 {
		t.Errorf("after the bad requests: %d %v", status, v)
	}
	for _, path := range []string{"/health", "/ready", "/v1/models", "/metrics"} {
		resp, err := http.Get(url + path)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %s: %v %v", path, resp.Status, err)
		}
		resp.Body.Close()
	}
	// Readiness: 503 with a full queue and while draining; liveness stays.
	ready := func() (int, int) {
		r1, err1 := http.Get(url + "/ready")
		r2, err2 := http.Get(url + "/health")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		r1.Body.Close()
		r2.Body.Close()
		return r1.StatusCode, r2.StatusCode
	}
	srv.waiting.Store(1)
	if r, h := ready(); r != 503 || h != 200 {
		t.Errorf("full queue: ready %d, health %d", r, h)
	}
	srv.waiting.Store(0)
	srv.draining.Store(true)
	if r, h := ready(); r != 503 || h != 200 {
		t.Errorf("draining: ready %d, health %d", r, h)
	}
	srv.draining.Store(false)
}

// A client that goes away cancels its search and frees its cache at once.
func TestClientGoesAway(t *testing.T) {
	srv, url := start(t, chatStories(t), Config{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions",
		strings.NewReader(`{"prompt": "Once upon a time", "max_tokens": 400, "stream": true, "entropix": {"budget_rows": 100000, "max_width": 16}}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	resp.Body.Read(buf) // the first chunk: the search runs
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for srv.eng.BlocksInUse() != 0 || srv.running.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the client left: %d blocks in use, %d searches running", srv.eng.BlocksInUse(), srv.running.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A stop string ends the search inside the engine, in every mode: the
// text ends before it, finish_reason is "stop", the tokens agree and the
// stream never shows it.
func TestStopStrings(t *testing.T) {
	arith := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	_, url := start(t, arith, Config{ModelName: "arith"})
	client := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("none"))
	ctx := context.Background()
	for _, mode := range []string{"greedy", "beam-adaptive", "self-consistency"} {
		params := openai.CompletionNewParams{Model: "arith", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(fay)},
			MaxTokens: openai.Int(120), Stop: openai.CompletionNewParamsStopUnion{OfStringArray: []string{"####", "no such text"}}}
		ext := option.WithJSONSet("entropix", map[string]any{"mode": mode})
		c, err := client.Completions.New(ctx, params, ext)
		if err != nil {
			t.Fatal(err)
		}
		var x struct {
			Entropix []struct {
				Stopped string `json:"stopped"`
				Tokens  []int  `json:"tokens"`
			} `json:"entropix"`
		}
		json.Unmarshal([]byte(c.RawJSON()), &x)
		text := c.Choices[0].Text
		if strings.Contains(text, "#") || c.Choices[0].FinishReason != "stop" || len(x.Entropix) != 1 || x.Entropix[0].Stopped != "stop" {
			t.Errorf("%s: %q, finish %q, %+v", mode, text, c.Choices[0].FinishReason, x.Entropix)
			continue
		}
		if len(x.Entropix[0].Tokens) == 0 || len(text) < 10 {
			t.Errorf("%s: %q, tokens %v", mode, text, x.Entropix[0].Tokens)
		}
		if mode != "greedy" {
			continue
		}
		stream := client.Completions.NewStreaming(ctx, params, ext)
		var streamed strings.Builder
		for stream.Next() {
			if ch := stream.Current(); len(ch.Choices) > 0 {
				streamed.WriteString(ch.Choices[0].Text)
			}
		}
		if err := stream.Err(); err != nil || streamed.String() != text {
			t.Errorf("streamed %q (%v), want %q", streamed.String(), err, text)
		}
	}
}
