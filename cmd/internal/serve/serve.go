// Package serve is entropix-search's OpenAI-compatible HTTP server.
//
// Every request is one search (n of them for n > 1) on one shared
// engine.Engine, whose driver advances all running searches by one step
// per forward pass: requests are batched together as they come and go
// (continuous batching), and each may use its own mode and search
// settings, given in an "entropix" extension object with the names of the
// command line's flags and policy file. Admission is bounded (a semaphore
// from golang.org/x/sync for the searches that run, a bounded queue
// behind it, then 429 with Retry-After); a client that disconnects
// cancels its search and frees its cache at once; bad input is a 4xx with
// an OpenAI-style error object and never disturbs other requests.
//
// Endpoints: POST /v1/completions and /v1/chat/completions (with "stream":
// true as server-sent events ending in "data: [DONE]"), GET /v1/models,
// GET /health (liveness), GET /ready (readiness: 503 while draining or
// with a full queue), GET /metrics (Prometheus), and GET /v1/trees/{id}
// (a recent search's tree, as JSON, DOT, SVG or the HTML viewer).
package serve

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/semaphore"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	_ "github.com/entropix-search/entropix-search/model/cpu" // the CPU backend, model.NewBackend("cpu", ...)
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// Config configures a Server.
type Config struct {
	// ModelName is the id /v1/models reports and responses carry.
	ModelName string
	// MaxSearches bounds the searches that run at once (default 16);
	// Queue the requests that wait for one beyond them (default 64):
	// more get 429.
	MaxSearches, Queue int
	// MaxTokens bounds max_tokens (default: the model's context).
	MaxTokens int
	// Policy is the default search policy (policy.DefaultFile).
	Policy policy.File
	// Grace is how long a shutdown lets in-flight requests finish
	// before it cancels them (default 10 s).
	Grace time.Duration
	// Trees is how many recent trees /v1/trees keeps (default 64).
	Trees int
}

// maxBody bounds a request body.
const maxBody = 4 << 20

// maxN bounds n, the choices of one request.
const maxN = 8

// Server serves one model.
type Server struct {
	m       *model.Model
	eng     *engine.Engine
	cfg     Config
	sem     *semaphore.Weighted
	waiting atomic.Int64
	running atomic.Int64
	// draining is set once a shutdown began: /ready then says 503.
	draining atomic.Bool
	trees    *treeCache
	reg      *prometheus.Registry
	met      metrics
	seq      atomic.Uint64
}

type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	rows      prometheus.Counter
	generated prometheus.Counter
	// restarts and restartRows count the searches run again for want of
	// KV blocks and the rows thrown away (a pool too small for the load).
	restarts, restartRows prometheus.Counter
}

// New returns a server for m over eng (an engine of m).
func New(m *model.Model, eng *engine.Engine, cfg Config) *Server {
	if cfg.MaxSearches <= 0 {
		cfg.MaxSearches = 16
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 64
	}
	if cfg.MaxTokens <= 0 || cfg.MaxTokens > m.Config.ContextLen {
		cfg.MaxTokens = m.Config.ContextLen
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Trees <= 0 {
		cfg.Trees = 64
	}
	if cfg.ModelName == "" {
		cfg.ModelName = "entropix-search"
	}
	s := &Server{m: m, eng: eng, cfg: cfg, sem: semaphore.NewWeighted(int64(cfg.MaxSearches)),
		trees: newTreeCache(cfg.Trees), reg: prometheus.NewRegistry()}
	s.met = metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "entropix_requests_total", Help: "Requests by endpoint and HTTP status."}, []string{"endpoint", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "entropix_request_seconds", Help: "Request latency.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16)}, []string{"endpoint"}),
		rows:      prometheus.NewCounter(prometheus.CounterOpts{Name: "entropix_forward_rows_total", Help: "Forward rows spent by finished searches."}),
		generated: prometheus.NewCounter(prometheus.CounterOpts{Name: "entropix_generated_tokens_total", Help: "Tokens returned."}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "entropix_search_restarts_total",
			Help: "Searches preempted for an older one's KV blocks and run again (a larger --kv-tokens avoids them)."}),
		restartRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "entropix_restart_rows_total", Help: "Forward rows spent by runs of preempted searches, thrown away."}),
	}
	s.reg.MustRegister(s.met.requests, s.met.latency, s.met.rows, s.met.generated, s.met.restarts, s.met.restartRows,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "entropix_queue_depth", Help: "Requests waiting for a search slot."}, func() float64 { return float64(s.waiting.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "entropix_searches_running", Help: "Searches running."}, func() float64 { return float64(s.running.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "entropix_kv_blocks_in_use", Help: "KV cache blocks in use."}, func() float64 { return float64(eng.BlocksInUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "entropix_rows_per_pass", Help: "Forward rows per pass since start (the batching)."}, func() float64 {
			p, r := eng.Batching()
			if p == 0 {
				return 0
			}
			return float64(r) / float64(p)
		}),
	)
	return s
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", s.timed("completions", s.completions))
	mux.HandleFunc("POST /v1/chat/completions", s.timed("chat", s.chat))
	mux.HandleFunc("GET /v1/models", s.timed("models", s.models))
	mux.HandleFunc("GET /health", s.timed("health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	mux.HandleFunc("GET /ready", s.timed("ready", s.ready))
	mux.HandleFunc("GET /v1/trees/{id}", s.timed("trees", s.tree))
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), "", "not_found")
	})
	return mux
}

// ready is the readiness probe: 200 while the server takes requests, 503
// once it drains for a shutdown or while its queue is full, so that a
// load balancer (a Kubernetes Service) sends the next requests to
// another replica. /health is the liveness probe: 200 while the process
// serves at all.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.draining.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
	case s.waiting.Load() >= int64(s.cfg.Queue):
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "busy"})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) timed(name string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		s.met.requests.WithLabelValues(name, strconv.Itoa(sw.code)).Inc()
		s.met.latency.WithLabelValues(name).Observe(time.Since(t0).Seconds())
	}
}

// Serve serves on ln until ctx is done, then stops accepting, lets the
// requests in flight finish within the grace period, cancels the rest and
// returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	grace, stop := context.WithTimeout(context.Background(), s.cfg.Grace)
	defer stop()
	err := srv.Shutdown(grace)
	if errors.Is(err, context.DeadlineExceeded) {
		cancel() // the searches still running end now
		err = srv.Close()
	}
	<-errc
	return err
}

// apiError is an error with its HTTP status and OpenAI error fields.
type apiError struct {
	status          int
	typ, msg, param string
	code            string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: fmt.Sprintf(format, args...), param: param, code: "invalid_value"}
}

func writeError(w http.ResponseWriter, status int, typ, msg, param, code string) {
	body := map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nullable(param), "code": nullable(code)}}
	writeJSON(w, status, body)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func writeAPIError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}
	}
	if ae.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, ae.status, ae.typ, ae.msg, ae.param, ae.code)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
		{"id": s.cfg.ModelName, "object": "model", "created": 0, "owned_by": "entropix-search"}}})
}

// admit waits for a search slot, or refuses when the queue is full.
func (s *Server) admit(ctx context.Context, n int) (release func(), err error) {
	if s.waiting.Add(1) > int64(s.cfg.Queue) {
		s.waiting.Add(-1)
		return nil, &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", msg: "the server is busy: too many requests waiting", code: "rate_limit_exceeded"}
	}
	err = s.sem.Acquire(ctx, int64(n))
	s.waiting.Add(-1)
	if err != nil {
		return nil, &apiError{status: 499, typ: "invalid_request_error", msg: "the client went away", code: "canceled"}
	}
	s.running.Add(int64(n))
	return func() { s.running.Add(-int64(n)); s.sem.Release(int64(n)) }, nil
}

// treeCache keeps the trees of the most recent searches.
type treeCache struct {
	mu    sync.Mutex
	cap   int
	order *list.List // of string ids, newest first
	byID  map[string]*cachedTree
}

type cachedTree struct {
	t     *tree.Tree
	title string
	el    *list.Element
}

func newTreeCache(n int) *treeCache {
	return &treeCache{cap: n, order: list.New(), byID: map[string]*cachedTree{}}
}

func (c *treeCache) put(id, title string, t *tree.Tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID[id] = &cachedTree{t: t, title: title, el: c.order.PushFront(id)}
	for c.order.Len() > c.cap {
		old := c.order.Remove(c.order.Back()).(string)
		delete(c.byID, old)
	}
}

func (c *treeCache) get(id string) (*cachedTree, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.byID[id]
	return t, ok
}

func (s *Server) tree(w http.ResponseWriter, r *http.Request) {
	ct, ok := s.trees.get(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "invalid_request_error", "no such tree (only the most recent are kept)", "id", "not_found")
		return
	}
	switch f := r.URL.Query().Get("format"); f {
	case "", "json":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ct.t)
	case "dot":
		w.Header().Set("Content-Type", "text/vnd.graphviz")
		ct.t.WriteDOT(w, tree.DOTOptions{Title: ct.title})
	case "svg":
		w.Header().Set("Content-Type", "image/svg+xml")
		if err := ct.t.WriteSVGContext(r.Context(), w, tree.DOTOptions{Title: ct.title}); err != nil {
			writeError(w, http.StatusNotImplemented, "server_error", err.Error(), "format", "unavailable")
		}
	case "html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		ct.t.WriteHTML(w, tree.HTMLOptions{Title: ct.title, Thresholds: s.cfg.Policy.Thresholds, TokenText: s.m.Tokenizer.Piece})
	default:
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("format %q: want json, dot, svg or html", f), "format", "invalid_value")
	}
}
