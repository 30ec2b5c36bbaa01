package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/cmd/internal/outfile"
	"github.com/entropix-search/entropix-search/cmd/internal/serve"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
	"github.com/entropix-search/entropix-search/policy"
)

func init() {
	register("backends", "one backend against another (a GPU against the CPU): agreement and speed", runBackends)
}

// backendFlags lets a backend package that takes options (a library
// folder, a device) add its flags to the backends subcommand: each
// function adds its flags and returns the function that applies them
// once parsed, before any backend is made.
var backendFlags []func(fs *flag.FlagSet) (apply func() error)

// backendInfo lets a backend package describe what it runs on (its
// libraries, its devices) in the check's header: each function is given
// the backends the check uses and returns a line, or "" to say nothing.
// They run after the flags are applied.
var backendInfo []func(used []string) string

// graphCounts, when a graph backend is built in, reports a backend's
// graphs so far (false: not one of its backends).
var graphCounts func(model.Backend) (bench.GraphCounts, bool)

// backendsReport is the JSON the backends subcommand writes.
type backendsReport struct {
	Machine machine               `json:"machine"`
	Args    []string              `json:"args"`
	Models  []*bench.BackendCheck `json:"models"`
	Notes   []string              `json:"notes,omitempty"`
	Wall    time.Duration         `json:"wall_ns"`
}

func runBackends(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "[-a cpu] [-b ggml] [-shape llama3.2-1b] [-dtype q8_0,q4_k | -m FILE] [-timings b] [-bandwidth GBps] [-json FILE] [-quick]"
	fs := newFlagSet("backends", synopsis, stderr)
	a := fs.String("a", "cpu", "the reference `backend`")
	b := fs.String("b", "ggml", "the `backend` checked against -a")
	shapeName := fs.String("shape", "llama3.2-1b", "generated model shape: "+strings.Join(synth.Names(), ", "))
	dtypeNames := fs.String("dtype", "q8_0,q4_k", "weight `types` of the generated models, comma-separated: q8_0, q4_k (llama.cpp's Q4_K_M mix), f32")
	modelPath := fs.String("m", "", "check this GGUF `file` instead of generated models")
	seed := fs.Uint64("seed", 1, "seed of the random weights and of the token stream")
	kvName := fs.String("kv", "auto", "KV cache type of both backends: f32, f16, or auto (f16 for quantized weights)")
	quick := fs.Bool("quick", false, "small counts everywhere: a minute on a small shape on two cores")
	agree := fs.Bool("agree", true, "compare the backends' outputs")
	timings := fs.String("timings", "b", "whose speed to measure: a, b, a,b or none")
	bandwidth := fs.Float64("bandwidth", 0, "the device's memory bandwidth in `GBps` (H100 3350, H200 4800): reports the share each step uses")
	decodeTokens := fs.Int("decode-tokens", 0, "tokens of the one-row decode (default 64; quick 16)")
	prefix := fs.Int("prefix", 0, "prompt the branches share (default 512; quick 64)")
	branches := fs.String("branches", "1,16,64", "branch `counts` of the branch step (the first should be 1)")
	promptTokens := fs.Int("prefill", 0, "tokens of the prefill (default 512; quick 64)")
	rounds := fs.Int("rounds", 0, "rounds of each timed measurement (default 3; quick 1)")
	searchTokens := fs.Int("search-tokens", 0, "tokens of each beam-adaptive search of the search-time measurement (default 64; quick 16; -1 skips it)")
	serverClients := fs.Int("clients", 16, "concurrent clients of the server measurement (0 skips it)")
	serverTime := fs.Duration("server-time", 0, "duration of each server point (default 10s; quick 1s)")
	serverTokens := fs.Int("server-tokens", 0, "max_tokens of each server request (default 64; quick 16)")
	threads := fs.Int("threads", 0, "the CPU backend's kernel threads (0: GOMAXPROCS)")
	jsonPath := fs.String("json", "", "also write the results as JSON to this `file` (atomically, after each part: a run cut short keeps what it measured)")
	keep := fs.String("keep", "", "write the generated models into this `folder` and keep them (default: a temporary folder, removed)")
	timeout := fs.Duration("timeout", 0, "stop measuring after this long and report what was measured (0: no limit)")
	render := fs.String("render", "", "measure nothing: print the markdown of the JSON `file` an earlier run wrote (all it measured before it stopped)")
	var applies []func() error
	for _, f := range backendFlags {
		applies = append(applies, f(fs))
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: entropix-bench backends %s\n\n"+
			"Checks backend -b against backend -a (registered: %s) on generated models of\n"+
			"a real shape with random weights (or -m FILE): how far b's logits, entropy,\n"+
			"varentropy and top-10 are from a's on one token stream (a prefill, one-row\n"+
			"decode steps, a step of forks of one sequence), whether greedy decoding picks\n"+
			"the same tokens, then the speed of each backend in -timings: decode at one\n"+
			"row, the step of 16 and 64 branches forked from one prompt, a prefill,\n"+
			"beam-adaptive's time outside the forward pass, and an in-process server's\n"+
			"throughput with -clients concurrent beam-adaptive requests against one.\n"+
			"Markdown goes to standard output, progress to standard error.\n\n",
			synopsis, strings.Join(model.Backends(), ", "))
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *render != "" {
		return renderBackends(*render, stdout)
	}
	start := time.Now()
	for _, name := range []string{*a, *b} {
		if !slices.Contains(model.Backends(), name) {
			return usagef("no backend %q in this build (registered: %s)", name, strings.Join(model.Backends(), ", "))
		}
	}
	var timed []string
	switch strings.ReplaceAll(*timings, " ", "") {
	case "none", "":
	case "a":
		timed = []string{*a}
	case "b":
		timed = []string{*b}
	case "a,b", "b,a":
		timed = []string{*a, *b}
		if *a == *b {
			timed = timed[:1]
		}
	default:
		return usagef("-timings %q: want a, b, a,b or none", *timings)
	}
	if _, _, err := model.ParseKVType(*kvName); err != nil {
		return usagef("-kv: %v", err)
	}
	var dtypes []kernels.DType
	if *modelPath == "" {
		for _, s := range strings.Split(*dtypeNames, ",") {
			dt, err := parseDTypes(strings.TrimSpace(s), false)
			if err != nil {
				return err
			}
			dtypes = append(dtypes, dt[0])
		}
	}
	shape, err := synth.Lookup(*shapeName)
	if err != nil && *modelPath == "" {
		return usagef("%v", err)
	}
	nbs, err := parseWidths(*branches)
	if err != nil || len(nbs) == 0 {
		return usagef("-branches %q: want branch counts such as 1,16,64", *branches)
	}
	if *threads < 0 || *decodeTokens < 0 || *prefix < 0 || *promptTokens < 0 || *rounds < 0 || *serverClients < 0 || *serverTokens < 0 || *bandwidth < 0 {
		return usagef("negative counts")
	}
	if *jsonPath != "" {
		if err := outfile.Check(*jsonPath); err != nil {
			return usagef("-json: %v", err)
		}
	}
	for _, apply := range applies {
		if err := apply(); err != nil {
			return err
		}
	}
	if *threads > 0 {
		kernels.SetThreads(*threads)
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}

	// The counts: -quick's, then the flags given.
	sc := bench.DefaultSpeedConfig()
	sc.Rounds, sc.DecodeTokens, sc.Prefix, sc.PromptTokens, sc.Steps = 3, 64, 512, 512, 8
	ac := bench.DefaultAgreeConfig()
	ac.Seed = *seed
	srvTime, srvTokens, srchTokens, srchRounds := 10*time.Second, 64, 64, 2
	if *quick {
		sc.Rounds, sc.DecodeTokens, sc.Prefix, sc.PromptTokens, sc.Steps = 1, 16, 64, 64, 2
		ac.Prompt, ac.Decode, ac.Branches, ac.Greedy = 32, 8, 4, 16
		srvTime, srvTokens, srchTokens, srchRounds = time.Second, 16, 16, 1
	}
	sc.Branches = nbs
	setPos := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	setPos(&sc.DecodeTokens, *decodeTokens)
	setPos(&sc.Prefix, *prefix)
	setPos(&sc.PromptTokens, *promptTokens)
	setPos(&sc.Rounds, *rounds)
	setPos(&srvTokens, *serverTokens)
	setPos(&srchTokens, *searchTokens)
	if *searchTokens < 0 {
		srchTokens = 0
	}
	if *serverTime > 0 {
		srvTime = *serverTime
	}

	rep := &backendsReport{Machine: describeMachine(), Args: args}
	for _, f := range backendInfo {
		if line := f([]string{*a, *b}); line != "" {
			rep.Machine.Backends = append(rep.Machine.Backends, line)
		}
	}
	writeJSON := func() error {
		if *jsonPath == "" {
			return nil
		}
		rep.Wall = time.Since(start)
		return outfile.Write(*jsonPath, stdout, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		})
	}
	if err := rep.Machine.markdown(stdout, *a, *b); err != nil {
		return err
	}

	dir := *keep
	if *modelPath == "" && dir == "" {
		d, err := os.MkdirTemp("", "entropix-backends-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	type job struct {
		name, path string
		dt         kernels.DType
	}
	var jobs []job
	if *modelPath != "" {
		jobs = append(jobs, job{name: filepath.Base(*modelPath), path: *modelPath})
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, dt := range dtypes {
			jobs = append(jobs, job{name: fmt.Sprintf("%s %v", shape.Name, dt), dt: dt,
				path: filepath.Join(dir, fmt.Sprintf("%s-%s-seed%d.gguf", shape.Name, strings.ToLower(dt.String()), *seed))})
		}
	}
	var failed []string
	for _, j := range jobs {
		if err := ctx.Err(); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: not measured: %v", j.name, err))
			break
		}
		t0 := time.Now()
		if *modelPath == "" {
			if _, err := os.Stat(j.path); err != nil {
				fmt.Fprintf(stderr, "generating %s (seed %d) into %s...\n", j.name, *seed, j.path)
				if err := writeSynth(j.path, shape, j.dt, *seed); err != nil {
					return err
				}
			}
		}
		m, err := model.Load(j.path, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s ready in %s\n", j.name, time.Since(t0).Round(time.Millisecond))
		chk := &bench.BackendCheck{Model: j.name, A: *a, B: *b, BandwidthGBps: *bandwidth}
		rep.Models = append(rep.Models, chk)
		save := func() error {
			chk.Wall = time.Since(t0)
			return writeJSON()
		}
		err = checkModel(ctx, m, chk, j.path, *kvName, timed, ac, sc, srchTokens, srchRounds,
			serverPlan{clients: *serverClients, dur: srvTime, tokens: srvTokens}, *agree, save, stderr)
		m.Close()
		if err != nil {
			return err
		}
		chk.Wall = time.Since(t0)
		if err := chk.Markdown(stdout); err != nil {
			return err
		}
		if chk.AgreementError != "" {
			failed = append(failed, j.name+": agreement: "+chk.AgreementError)
		}
		for _, t := range chk.Timings {
			for _, e := range t.Errors {
				failed = append(failed, j.name+": "+t.Backend+": "+e)
			}
		}
		if err := writeJSON(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s done in %s\n", j.name, time.Since(t0).Round(time.Millisecond))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(stdout, "- %s\n", n)
	}
	if err := writeJSON(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d measurements failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return ctx.Err()
}

// renderBackends prints the markdown of a report the subcommand wrote.
func renderBackends(path string, stdout io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep backendsReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(rep.Models) == 0 {
		return fmt.Errorf("%s: no model was checked", path)
	}
	if err := rep.Machine.markdown(stdout, rep.Models[0].A, rep.Models[0].B); err != nil {
		return err
	}
	for _, m := range rep.Models {
		if err := m.Markdown(stdout); err != nil {
			return err
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(stdout, "- %s\n", n)
	}
	return nil
}

// writeSynth writes a generated model to path, atomically.
func writeSynth(path string, shape synth.Shape, dt kernels.DType, seed uint64) error {
	return outfile.Write(path, nil, func(w io.Writer) error { return synth.WriteGGUF(w, shape, dt, seed, nil) })
}

// serverPlan says how the server is measured.
type serverPlan struct {
	clients int // 0: not measured
	dur     time.Duration
	tokens  int // max_tokens of a request
}

// checkModel compares backend b with a on m, and measures the speed of
// the backends in timed, into chk; save is called after each part, so
// that a crash loses only the part it happened in.
func checkModel(ctx context.Context, m *model.Model, chk *bench.BackendCheck, path, kvName string, timed []string, ac bench.AgreeConfig, sc bench.SpeedConfig,
	searchTokens, searchRounds int, sp serverPlan, agree bool, save func() error, stderr io.Writer) error {
	kv, err := m.KVType(kvName)
	if err != nil {
		return err
	}
	ac.KVType, sc.KVType = kv, kv
	chk.Params, chk.KVType = paramCount(m), kv
	if t, err := bench.TrafficOf(path, m.Config, kv); err == nil {
		chk.Traffic = t
	}
	name, a, b := chk.Model, chk.A, chk.B
	if agree {
		fmt.Fprintf(stderr, "%s: comparing %s with %s...\n", name, b, a)
		t0 := time.Now()
		if ag, err := bench.CompareBackends(m, a, b, ac); err != nil {
			chk.AgreementError = err.Error()
			fmt.Fprintf(stderr, "%s: agreement: %v\n", name, err)
		} else {
			chk.Agreement = ag
		}
		fmt.Fprintf(stderr, "%s: agreement in %s\n", name, time.Since(t0).Round(time.Millisecond))
		if err := save(); err != nil {
			return err
		}
	}
	for _, be := range timed {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(stderr, "%s: timing %s...\n", name, be)
		t0 := time.Now()
		// One engine serves the search measurement and the server: a
		// backend made once, and closed once both are done.
		var eng *engine.Engine
		var engErr error
		if searchTokens > 0 || sp.clients > 0 {
			// Room for every client's search, its frontier's waiting
			// alternatives too (random weights fork at most steps): a
			// search run again for want of blocks would time lost work.
			per := min(m.Config.ContextLen, 32+max(sp.tokens, searchTokens)+kvcache.DefaultBlockSize)
			eng, engErr = engine.New(m, engine.WithBackend(be), engine.WithKVType(kv), engine.WithCacheTokens(per*32*max(sp.clients, 4)))
		}
		t, err := bench.MeasureBackendTiming(ctx, m, be, sc, eng, searchTokens, searchRounds)
		if t == nil { // the backend could not be made: say so and go on
			fmt.Fprintf(stderr, "%s: %s: %v\n", name, be, err)
			chk.Timings = append(chk.Timings, &bench.BackendTiming{Backend: be, Config: sc, Errors: []string{err.Error()}})
			continue
		}
		chk.Timings = append(chk.Timings, t)
		if engErr != nil {
			t.Errors = append(t.Errors, fmt.Sprintf("engine: %v", engErr))
		}
		if err := save(); err != nil {
			return err
		}
		if err == nil && eng != nil && sp.clients > 0 {
			fmt.Fprintf(stderr, "%s: %s's server, 1 then %d clients, %s each...\n", name, be, sp.clients, sp.dur)
			st, err := measureServer(ctx, m, eng, sp)
			if err != nil {
				t.Errors = append(t.Errors, fmt.Sprintf("server: %v", err))
			}
			t.Server = st
			if err := save(); err != nil {
				return err
			}
		}
		if eng != nil {
			if err := eng.Close(); err != nil {
				t.Errors = append(t.Errors, fmt.Sprintf("closing the engine: %v", err))
			}
		}
		fmt.Fprintf(stderr, "%s: %s timed in %s\n", name, be, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// serverPrompts are the server measurement's prompts, one a request.
var serverPrompts = []string{"Once upon a time", "Lily wanted to", "The little dog", "Tom and his mom", "One day, a girl", "The sun was"}

// measureServer runs an in-process server of m on eng over loopback and
// measures its throughput with one client, then with sp.clients
// concurrent ones, each sending beam-adaptive requests one after another
// for sp.dur (a request started before the end finishes).
func measureServer(ctx context.Context, m *model.Model, eng *engine.Engine, sp serverPlan) (*bench.ServerTiming, error) {
	srv := serve.New(m, eng, serve.Config{MaxSearches: sp.clients, Queue: 4 * sp.clients, Policy: policy.DefaultFile(), Grace: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	defer func() {
		stop()
		<-done
	}()
	url := "http://" + ln.Addr().String() + "/v1/completions"
	client := &http.Client{Timeout: 10 * time.Minute}
	type answer struct{ tokens, restarts, restartRows int }
	request := func(i int) (answer, error) {
		body := fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "seed": %d, "entropix": {"mode": "beam-adaptive"}}`,
			serverPrompts[i%len(serverPrompts)], sp.tokens, i)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return answer{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return answer{}, err
		}
		defer resp.Body.Close()
		var out struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Entropix []struct {
				Stats engine.Stats `json:"stats"`
			} `json:"entropix"`
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return answer{}, err
		}
		if resp.StatusCode != http.StatusOK {
			return answer{}, fmt.Errorf("status %s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return answer{}, err
		}
		a := answer{tokens: out.Usage.CompletionTokens}
		for _, x := range out.Entropix {
			a.restarts += x.Stats.Restarts
			a.restartRows += x.Stats.RestartRows
		}
		return a, nil
	}
	// A warm-up: the first step of a shape may compile (a GPU's kernels).
	if _, err := request(0); err != nil {
		return nil, fmt.Errorf("warm-up request: %w", err)
	}
	var firstErr error
	point := func(clients int) bench.ServerPoint {
		p := bench.ServerPoint{Clients: clients}
		passes0, rows0 := eng.Batching()
		var g0 bench.GraphCounts
		counted := false
		if graphCounts != nil {
			g0, counted = graphCounts(eng.Backend())
		}
		counts := func() { // the passes and graphs since the point began
			passes, rows := eng.Batching()
			p.Passes, p.Rows = passes-passes0, rows-rows0
			if counted {
				g, _ := graphCounts(eng.Backend())
				p.Graphs = &bench.GraphCounts{Built: g.Built - g0.Built, Reused: g.Reused - g0.Reused, BuildTime: g.BuildTime - g0.BuildTime, Nodes: g.Nodes - g0.Nodes, MaxSplits: g.MaxSplits}
			}
		}
		var mu sync.Mutex
		var lat []time.Duration
		t0 := time.Now()
		deadline := t0.Add(sp.dur)
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
					r0 := time.Now()
					a, err := request(c*1000 + i)
					mu.Lock()
					if err != nil {
						p.Errors++
						if firstErr == nil {
							firstErr = err
						}
					} else {
						p.Requests++
						p.Tokens += a.tokens
						p.Restarts += a.restarts
						p.RestartRows += a.restartRows
						lat = append(lat, time.Since(r0))
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		p.Seconds = time.Since(t0).Seconds()
		p.TokensPerSec = float64(p.Tokens) / p.Seconds
		p.RequestsPerSec = float64(p.Requests) / p.Seconds
		if len(lat) > 0 {
			slices.Sort(lat)
			p.P50 = lat[(len(lat)-1)/2]
		}
		counts()
		return p
	}
	st := &bench.ServerTiming{Mode: engine.BeamAdaptive.String(), MaxTokens: sp.tokens}
	st.One = point(1)
	st.Many = point(sp.clients)
	if st.One.TokensPerSec > 0 {
		st.Ratio = st.Many.TokensPerSec / st.One.TokensPerSec
	}
	if st.One.Requests == 0 || st.Many.Requests == 0 {
		if firstErr == nil {
			firstErr = ctx.Err()
		}
		return st, fmt.Errorf("no request completed: %v", firstErr)
	}
	if n := eng.BlocksInUse(); n != 0 && ctx.Err() == nil { // cancelled searches free theirs as they stop
		return st, fmt.Errorf("%d KV blocks in use after the requests", n)
	}
	return st, nil
}

// machine describes where a check ran.
type machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	Memory    string `json:"memory"`
	OS        string `json:"os"`
	Go        string `json:"go"`
	Kernels   string `json:"kernels"` // the CPU backend's
	Threads   int    `json:"threads"`
	GPU       string `json:"gpu,omitempty"`       // nvidia-smi's answer
	Libraries string `json:"libraries,omitempty"` // the ggml folder and its build
	// Backends are the backends' own descriptions (backendInfo).
	Backends []string `json:"backends,omitempty"`
}

// describeMachine reads the processor, memory, system and GPU.
func describeMachine() machine {
	mc := machine{Cores: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		Kernels: kernels.Implementation(), Threads: kernels.Threads()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				mc.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
				f := strings.Fields(v)
				if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
					mc.Memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				mc.OS = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		mc.OS = strings.TrimSpace(mc.OS + ", Linux " + strings.TrimSpace(string(b)))
	}
	if smi, err := exec.LookPath("nvidia-smi"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, smi, "--query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem", "--format=csv,noheader").Output()
		cancel()
		if err == nil {
			mc.GPU = strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "; ")), " ")
		}
	}
	if dir := os.Getenv("ENTROPIX_GGML_DIR"); dir != "" {
		mc.Libraries = "ENTROPIX_GGML_DIR=" + dir
		if b, err := os.ReadFile(filepath.Join(dir, "_nlcBuildMetadata.json")); err == nil {
			var meta any
			if json.Unmarshal(b, &meta) == nil {
				c, _ := json.Marshal(meta)
				mc.Libraries += " " + string(c)
			}
		}
		if libs, err := filepath.Glob(filepath.Join(dir, "libggml*.so")); err == nil {
			var names []string
			for _, l := range libs {
				n := filepath.Base(l)
				if !strings.HasPrefix(n, "libggml-cpu-") {
					names = append(names, n)
				}
			}
			mc.Libraries += " (" + strings.Join(names, ", ") + ")"
		}
	}
	return mc
}

// markdown writes the machine's description.
func (mc machine) markdown(w io.Writer, a, b string) error {
	var s strings.Builder
	fmt.Fprintf(&s, "# Backend check: %s against %s\n\n", b, a)
	fmt.Fprintf(&s, "- machine: %s, %d cores, %s memory; %s\n", orDash(mc.CPU), mc.Cores, orDash(mc.Memory), orDash(mc.OS))
	fmt.Fprintf(&s, "- %s; CPU backend kernels %s, %d threads\n", mc.Go, mc.Kernels, mc.Threads)
	if mc.GPU != "" {
		fmt.Fprintf(&s, "- GPU (nvidia-smi: name, memory, driver, max SM and memory clocks): %s\n", mc.GPU)
	}
	if mc.Libraries != "" {
		fmt.Fprintf(&s, "- ggml libraries: %s\n", mc.Libraries)
	}
	for _, line := range mc.Backends {
		fmt.Fprintf(&s, "- %s\n", line)
	}
	s.WriteString("\n")
	_, err := io.WriteString(w, s.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
