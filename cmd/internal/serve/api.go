package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/policy"
)

// extension is the "entropix" object of a request: the search settings
// (engine.Settings), named as the command line's flags and the policy
// file.
type extension struct {
	Mode       string `json:"mode"`
	BudgetRows int    `json:"budget_rows"`
	// MaxWidth is the most live branches at once: the width K of beam,
	// cot-decoding, self-consistency and best-of, and beam-adaptive's
	// (0: the mode's default: 4, 1 for the single-path modes), as the
	// command line's --max-width (engine.Settings.MaxWidth).
	MaxWidth   int             `json:"max_width"`
	Score      string          `json:"score"`
	ReturnTree bool            `json:"return_tree"`
	Policy     json.RawMessage `json:"policy"`
	// Answer says how the finished paths' answers are read for their
	// vote: "marked" (the number after "####" or "answer is"),
	// "last-number" (that, else the last number: what entropix-bench
	// eval scores) or "none" (the whole text); by default the mode's own
	// (engine.Settings.Answer), as on the command line.
	Answer string `json:"answer"`
	// Verifier turns the server's verifier (serve --verifier) off
	// (false) or asks for it (true: an error when it has none); left
	// out, the searches that choose among paths use it when there is one.
	Verifier *bool `json:"verifier"`
}

// common are the fields completions and chat share.
type common struct {
	Model       string          `json:"model"`
	MaxTokens   *int            `json:"max_tokens"`
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	Seed        *int64          `json:"seed"`
	Stop        json.RawMessage `json:"stop"`
	N           *int            `json:"n"`
	Stream      bool            `json:"stream"`
	User        string          `json:"user"`
	Entropix    *extension      `json:"entropix"`
}

type completionRequest struct {
	common
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
}

type chatRequest struct {
	common
	Messages            []model.Message `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
}

// decode reads a JSON body into v: unknown fields are ignored (clients
// send many), a known field of the wrong type is a 400 naming it.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("", "reading the body: %v", err)
	}
	if len(b) > maxBody {
		return &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", msg: fmt.Sprintf("the body is larger than %d bytes", maxBody), code: "too_large"}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "common.") // the embedded struct's name is no field of the API
			return badRequest(field, "%s: want %s, got %s", field, te.Type, te.Value)
		}
		return badRequest("", "the body is not valid JSON: %v", err)
	}
	return nil
}

// job is one request's searches, ready to run.
type job struct {
	ids        []int
	prompt     string
	budget     engine.Budget
	opts       []engine.Option
	n          int
	seed       uint64
	mode       engine.Mode
	returnTree bool
	topProbs   int
}

// newJob turns the common fields into a job (the prompt's tokens are set by
// the caller).
func (s *Server) newJob(c *common, maxTokens *int, topProbs int) (*job, error) {
	st, err := settings(c, maxTokens, topProbs, s.cfg.Policy, s.cfg.MaxTokens)
	if err != nil {
		return nil, err
	}
	j := &job{n: 1, mode: st.Mode, budget: st.Budget(), opts: st.Options(), seed: st.Seed, topProbs: topProbs}
	if c.N != nil {
		if *c.N < 1 || *c.N > maxN {
			return nil, badRequest("n", "n %d: want 1..%d", *c.N, maxN)
		}
		j.n = *c.N
	}
	if c.Stream && j.n > 1 {
		return nil, badRequest("n", "streaming returns one choice: n must be 1")
	}
	if x := c.Entropix; x != nil {
		j.returnTree = x.ReturnTree
		if v := x.Verifier; v != nil {
			switch {
			case *v && s.eng.Options().Verifier == nil:
				return nil, badRequest("entropix.verifier", "the server has no verifier (start it with --verifier FILE)")
			case !*v:
				j.opts = append(j.opts, engine.WithVerifier(nil))
			}
		}
	}
	return j, nil
}

// CompletionSettings returns the search settings a /v1/completions
// request body asks for, on the server's policy base: what the server
// runs (for tests that compare them with the command line's).
func CompletionSettings(body []byte, base policy.File) (engine.Settings, error) {
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return engine.Settings{}, err
	}
	top := 0
	if req.Logprobs != nil {
		top = *req.Logprobs
	}
	return settings(&req.common, req.MaxTokens, top, base, math.MaxInt32) // the server bounds max_tokens by its model's context
}

// settings are the search settings of a request's fields on the policy
// base; maxTokens is at most limit.
func settings(c *common, maxTokens *int, topProbs int, base policy.File, limit int) (engine.Settings, error) {
	st := engine.DefaultSettings()
	st.File = base
	st.TopProbs = topProbs
	if maxTokens != nil {
		if *maxTokens <= 0 || *maxTokens > limit {
			return st, badRequest("max_tokens", "max_tokens %d: want 1..%d", *maxTokens, limit)
		}
		st.MaxTokens = *maxTokens
	}
	if c.Seed != nil {
		st.Seed = uint64(*c.Seed)
	}
	if c.Temperature != nil {
		if t := *c.Temperature; !(t >= 0 && t <= 2) {
			return st, badRequest("temperature", "temperature %v: want 0..2", t)
		}
		st.Sampling.Temperature = *c.Temperature
	}
	if c.TopP != nil {
		if p := *c.TopP; !(p > 0 && p <= 1) {
			return st, badRequest("top_p", "top_p %v: want (0, 1]", p)
		}
		st.Sampling.TopP = *c.TopP
	}
	stops, err := parseStop(c.Stop)
	if err != nil {
		return st, err
	}
	st.Stop = stops
	if x := c.Entropix; x != nil {
		if x.Mode != "" {
			if st.Mode, err = engine.ParseMode(x.Mode); err != nil {
				return st, badRequest("entropix.mode", "%v", err)
			}
		}
		if x.BudgetRows < 0 || x.MaxWidth < 0 || x.MaxWidth > policy.MaxForkWidth {
			return st, badRequest("entropix", "budget_rows must be >= 0 and max_width in 0..%d", policy.MaxForkWidth)
		}
		st.BudgetRows, st.MaxWidth = x.BudgetRows, x.MaxWidth
		if len(x.Policy) > 0 && string(x.Policy) != "null" {
			if st.File, err = policy.ReadFile(bytes.NewReader(x.Policy)); err != nil {
				return st, badRequest("entropix.policy", "%v", err)
			}
		}
		if x.Score != "" {
			if err := st.Score.UnmarshalText([]byte(x.Score)); err != nil {
				return st, badRequest("entropix.score", "%v", err)
			}
		}
		switch x.Answer {
		case "", "marked", "last-number", "none":
			st.Answer = x.Answer
		default:
			return st, badRequest("entropix.answer", "answer %q: want marked, last-number or none", x.Answer)
		}
	}
	if err := st.Validate(); err != nil {
		return st, badRequest("entropix", "%v", err)
	}
	return st, nil
}

func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) > 4 {
		return nil, badRequest("stop", "stop: want a string or up to 4 strings")
	}
	return many, nil
}

// outcome is one search's answer.
type outcome struct {
	text   string
	res    *engine.Result
	reason string
	treeID string
}

// run runs the job's searches (concurrently, batched by the engine) and
// streams the first one's text through emit when emit is not nil.
func (s *Server) run(ctx context.Context, j *job, emit func(string)) ([]outcome, error) {
	release, err := s.admit(ctx, j.n)
	if err != nil {
		return nil, err
	}
	defer release()
	outs := make([]outcome, j.n)
	errs := make([]error, j.n)
	var wg sync.WaitGroup
	for i := range j.n {
		wg.Go(func() {
			opts := append(append([]engine.Option(nil), j.opts...), engine.WithSeed(j.seed+uint64(i)))
			if i == 0 && emit != nil {
				opts = append(opts, engine.WithStream(emit))
			}
			res, err := s.eng.SearchTokensWith(ctx, j.prompt, j.ids, j.budget, opts...)
			if err != nil {
				errs[i] = err
				return
			}
			// finish_reason "stop": the text ended (end of text, a stop
			// string, beam-adaptive's settled vote); "length" otherwise.
			o := outcome{text: res.Text, res: res, reason: "length"}
			switch res.Stopped {
			case "eos", "stop", "settled":
				o.reason = "stop"
			}
			if j.returnTree {
				o.treeID = fmt.Sprintf("tree-%d", s.seq.Add(1))
				s.trees.put(o.treeID, fmt.Sprintf("%s · %s", j.mode, s.cfg.ModelName), res.Tree)
			}
			s.met.rows.Add(float64(res.Stats.Rows))
			s.met.generated.Add(float64(res.Stats.Generated))
			s.met.restarts.Add(float64(res.Stats.Restarts))
			s.met.restartRows.Add(float64(res.Stats.RestartRows))
			outs[i] = o
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, &apiError{status: 499, typ: "invalid_request_error", msg: "the client went away", code: "canceled"}
		case errors.Is(err, engine.ErrPromptTooLong):
			return nil, badRequest("prompt", "%v", err)
		}
		return nil, err
	}
	return outs, nil
}

// completionID names a response.
func (s *Server) completionID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().Unix(), s.seq.Add(1))
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := decode(r, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	prompt, err := promptText(req.Prompt)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	top := 0
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > 20 {
			writeAPIError(w, badRequest("logprobs", "logprobs %d: want 0..20", *req.Logprobs))
			return
		}
		top = *req.Logprobs
	}
	j, err := s.newJob(&req.common, req.MaxTokens, top)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	j.prompt = prompt
	j.ids = s.m.Tokenizer.Encode(prompt, s.m.Tokenizer.AddBOS())
	id := s.completionID("cmpl")
	created := time.Now().Unix()
	chunk := func(text string, reason any) map[string]any {
		return map[string]any{"id": id, "object": "text_completion", "created": created, "model": s.cfg.ModelName,
			"choices": []map[string]any{{"index": 0, "text": text, "finish_reason": reason, "logprobs": nil}}}
	}
	if req.Stream {
		s.stream(w, r, j, func(text string) any { return chunk(text, nil) }, func(o outcome) any { return chunk("", o.reason) }, nil)
		return
	}
	s.respond(w, r, j, id, "text_completion", created, func(i int, o outcome) map[string]any {
		return map[string]any{"index": i, "text": o.text, "finish_reason": o.reason, "logprobs": completionLogprobs(s, o, top)}
	})
}

// respond runs a job and writes its whole response, one choice per search.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, j *job, id, object string, created int64, choice func(int, outcome) map[string]any) {
	outs, err := s.run(r.Context(), j, nil)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	choices := make([]map[string]any, len(outs))
	for i, o := range outs {
		choices[i] = choice(i, o)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": object, "created": created, "model": s.cfg.ModelName,
		"choices": choices, "usage": usage(j, outs), "entropix": extensionOut(outs)})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := decode(r, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	if len(req.Messages) == 0 {
		writeAPIError(w, badRequest("messages", "messages: want at least one"))
		return
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant", "tool", "developer":
		default:
			writeAPIError(w, badRequest(fmt.Sprintf("messages[%d].role", i), "role %q: want system, user, assistant or tool", m.Role))
			return
		}
		if m.Role == "developer" {
			req.Messages[i].Role = "system"
		}
	}
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	top := 0
	if req.Logprobs {
		top = 1
		if req.TopLogprobs != nil {
			if *req.TopLogprobs < 0 || *req.TopLogprobs > 20 {
				writeAPIError(w, badRequest("top_logprobs", "top_logprobs %d: want 0..20", *req.TopLogprobs))
				return
			}
			top = max(*req.TopLogprobs, 1)
		}
	}
	j, err := s.newJob(&req.common, maxTokens, top)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	ids, stops, err := s.m.EncodeChat(req.Messages)
	if err != nil {
		writeAPIError(w, badRequest("messages", "this model cannot chat: %v", err))
		return
	}
	j.ids, j.prompt = ids, req.Messages[len(req.Messages)-1].Content
	j.opts = append(j.opts, engine.WithStopTokens(stops...))
	id := s.completionID("chatcmpl")
	created := time.Now().Unix()
	chunk := func(delta map[string]any, reason any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": s.cfg.ModelName,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": reason}}}
	}
	if req.Stream {
		s.stream(w, r, j, func(text string) any { return chunk(map[string]any{"content": text}, nil) },
			func(o outcome) any { return chunk(map[string]any{}, o.reason) },
			chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		return
	}
	s.respond(w, r, j, id, "chat.completion", created, func(i int, o outcome) map[string]any {
		return map[string]any{"index": i, "message": map[string]any{"role": "assistant", "content": o.text},
			"finish_reason": o.reason, "logprobs": chatLogprobs(s, o, top)}
	})
}

// stream runs the job and writes its text as server-sent events, then the
// final chunk and "data: [DONE]". The engine's driver calls the stream
// callback; the text goes through a buffer, so a slow client never holds
// up the other searches.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, j *job, piece func(string) any, final func(outcome) any, first any) {
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	var pending []string
	wake := make(chan struct{}, 1)
	emit := func(t string) {
		mu.Lock()
		pending = append(pending, t)
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	type result struct {
		outs []outcome
		err  error
	}
	done := make(chan result, 1)
	go func() {
		outs, err := s.run(r.Context(), j, emit)
		done <- result{outs, err}
	}()
	started := false
	send := func(v any) {
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	drain := func() {
		mu.Lock()
		ps := pending
		pending = nil
		mu.Unlock()
		for _, p := range ps {
			if p != "" {
				if !started && first != nil {
					send(first)
				}
				send(piece(p))
			}
		}
	}
	for {
		select {
		case <-wake:
			drain()
		case res := <-done:
			drain()
			if res.err != nil {
				if !started {
					writeAPIError(w, res.err)
					return
				}
				var ae *apiError
				msg := res.err.Error()
				if errors.As(res.err, &ae) {
					msg = ae.msg
				}
				send(map[string]any{"error": map[string]any{"message": msg, "type": "server_error"}})
				fmt.Fprint(w, "data: [DONE]\n\n")
				return
			}
			if !started && first != nil {
				send(first)
			}
			send(final(res.outs[0]))
			fmt.Fprint(w, "data: [DONE]\n\n")
			if flusher != nil {
				flusher.Flush()
			}
			return
		}
	}
}

// promptText reads a completion prompt: a string, or a list of one.
func promptText(raw json.RawMessage) (string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err != nil {
		var many []string
		if json.Unmarshal(raw, &many) != nil || len(many) != 1 {
			return "", badRequest("prompt", "prompt: want a string (or a list of one)")
		}
		one = many[0]
	}
	if strings.TrimSpace(one) == "" {
		return "", badRequest("prompt", "the prompt is empty")
	}
	return one, nil
}

func usage(j *job, outs []outcome) map[string]any {
	gen, rows := 0, 0
	for _, o := range outs {
		gen += len(o.res.Tokens)
		rows += o.res.Stats.Rows
	}
	return map[string]any{"prompt_tokens": len(j.ids), "completion_tokens": gen, "total_tokens": len(j.ids) + gen, "forward_rows": rows}
}

// extensionOut is the response's "entropix" object: per choice, why the
// search stopped, whether the row budget cut it short, its statistics,
// the tokens of its text, the complete paths it chose among (their texts
// and, with a verifier, its verdicts) and, when asked, its tree and the
// tree's id.
func extensionOut(outs []outcome) []map[string]any {
	var xs []map[string]any
	for _, o := range outs {
		x := map[string]any{"stopped": o.res.Stopped, "cut": o.res.Cut(), "stats": o.res.Stats, "tokens": o.res.Tokens, "paths": o.res.Paths}
		if o.treeID != "" {
			x["tree_id"] = o.treeID
			x["tree"] = o.res.Tree
		}
		xs = append(xs, x)
	}
	return xs
}

// committedTop returns the result's tokens with their log-probabilities
// and alternatives, from the tree.
func committedTop(o outcome) (toks []int, lps []float64, tops [][]policy.Candidate) {
	for id, n := range o.res.Tree.All() {
		if id != 0 && n.Committed && !math.IsInf(n.LogProb, 0) {
			toks = append(toks, n.Token)
			lps = append(lps, n.LogProb)
			tops = append(tops, n.Top)
		}
	}
	return toks, lps, tops
}

func completionLogprobs(s *Server, o outcome, k int) any {
	if k == 0 {
		return nil
	}
	toks, lps, tops := committedTop(o)
	var tokens []string
	var top []map[string]float64
	for i, t := range toks {
		tokens = append(tokens, s.m.Tokenizer.Piece(t))
		m := map[string]float64{}
		for _, c := range tops[i][:min(k, len(tops[i]))] {
			m[s.m.Tokenizer.Piece(c.Token)] = c.LogProb
		}
		top = append(top, m)
	}
	return map[string]any{"tokens": tokens, "token_logprobs": lps, "top_logprobs": top}
}

func chatLogprobs(s *Server, o outcome, k int) any {
	if k == 0 {
		return nil
	}
	toks, lps, tops := committedTop(o)
	var content []map[string]any
	for i, t := range toks {
		var alts []map[string]any
		for _, c := range tops[i][:min(k, len(tops[i]))] {
			alts = append(alts, map[string]any{"token": s.m.Tokenizer.Piece(c.Token), "logprob": c.LogProb})
		}
		content = append(content, map[string]any{"token": s.m.Tokenizer.Piece(t), "logprob": lps[i], "top_logprobs": alts})
	}
	return map[string]any{"content": content}
}
