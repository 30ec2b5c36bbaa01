package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/entropix-search/entropix-search/cmd/internal/serve"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/policy"
)

const serveUsage = `entropix-search serve: an OpenAI-compatible server; every request's branches
share one batched forward pass with every other request's.

Usage:
  entropix-search serve -m MODEL [--addr 127.0.0.1:8080] [--max-searches N] [--kv-tokens N]

Endpoints: POST /v1/completions, POST /v1/chat/completions ("stream": true for
server-sent events), GET /v1/models, GET /health, GET /ready, GET /metrics, GET /v1/trees/{id}.
Search settings go in an "entropix" object: {"mode": "beam-adaptive",
"budget_rows": 512, "max_width": 4, "score": "logprob", "return_tree": true,
"policy": {...}}.

Flags:
`

// runServe is the serve subcommand. ready, when not nil, receives the
// address the server listens on.
func runServe(ctx context.Context, args []string, stderr io.Writer, ready func(addr string)) error {
	fs := flag.NewFlagSet("entropix-search serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	modelPath := fs.String("m", "", "model file: GGUF or llama2.c `.bin`")
	tokPath := fs.String("z", "", "llama2.c tokenizer.bin for a .bin checkpoint")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	maxSearches := fs.Int("max-searches", 16, "searches that run at once (their rows share each forward pass)")
	queue := fs.Int("queue", 64, "requests that may wait for a search beyond those; more get 429")
	kvTokens := fs.Int("kv-tokens", 0, "KV cache capacity in token positions over all searches (0: 16 contexts' worth, at most 262144)")
	kvType := fs.String("kv-type", "auto", "KV cache type: f32, f16 or auto")
	grace := fs.Duration("grace", 10*time.Second, "on SIGTERM/SIGINT, how long requests in flight may finish")
	policyPath := fs.String("policy", "", "default search policy `file` (as --calibrate prints)")
	name := fs.String("model-name", "", "the model id the API reports (default: the file's name)")
	threads := fs.Int("threads", 0, "worker threads (0 = all cores)")
	var backend backendFlags
	backend.register(fs)
	verifierPath := fs.String("verifier", "", "outcome verifier `file` (GGUF, as entropix-bench train-verifier writes) that judges the paths of beam-adaptive, beam, self-consistency and best-of-N; a request's entropix.verifier false turns it off")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, serveUsage)
			fs.PrintDefaults()
		}
		return usageError{err}
	}
	switch {
	case *modelPath == "":
		return usageError{errors.New("serve: no model: give one with -m FILE")}
	case *maxSearches < 1 || *queue < 1 || *kvTokens < 0 || *grace < 0 || *threads < 0:
		return usageError{errors.New("serve: --max-searches and --queue must be positive, --kv-tokens, --grace and --threads not negative")}
	}
	if err := backend.check(); err != nil {
		return usageError{fmt.Errorf("serve: %w", err)}
	}
	pf := policy.DefaultFile()
	if *policyPath != "" {
		f, err := policy.LoadFile(*policyPath)
		if err != nil {
			return usageError{fmt.Errorf("--policy: %w", err)}
		}
		pf = f
	}
	if *threads > 0 {
		kernels.SetThreads(*threads)
	}
	m, err := model.Load(*modelPath, *tokPath)
	if err != nil {
		return usageError{err}
	}
	defer m.Close()
	kv, err := m.KVType(*kvType)
	if err != nil {
		return usageError{fmt.Errorf("--kv-type: %w", err)}
	}
	cache := *kvTokens
	if cache == 0 {
		cache = min(16*m.Config.ContextLen, 1<<18)
	}
	beOpt, err := backend.option(*threads, zerolog.New(stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger())
	if err != nil {
		return err
	}
	opts := []engine.Option{beOpt, engine.WithCacheTokens(cache), engine.WithKVType(kv)}
	if *verifierPath != "" {
		v, err := engine.LoadVerifier(*verifierPath)
		if err != nil {
			return usageError{fmt.Errorf("--verifier: %w", err)}
		}
		defer v.Model().Close()
		opts = append(opts, engine.WithVerifier(v))
	}
	eng, err := engine.New(m, opts...)
	if err != nil {
		if errors.Is(err, engine.ErrVerifierMismatch) {
			return usageError{fmt.Errorf("--verifier: %w", err)}
		}
		return err
	}
	defer eng.Close() // after the server: the searches still running end
	if *name == "" {
		*name = filepath.Base(*modelPath)
	}
	srv := serve.New(m, eng, serve.Config{ModelName: *name, MaxSearches: *maxSearches, Queue: *queue, Policy: pf, Grace: *grace})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return usageError{fmt.Errorf("--addr: %w", err)}
	}
	fmt.Fprintf(stderr, "entropix-search: serving %s on http://%s (OpenAI API at /v1)\n", *name, ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}
	if err := srv.Serve(ctx, ln); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	fmt.Fprintln(stderr, "entropix-search: server stopped")
	return nil
}
