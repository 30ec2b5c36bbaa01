package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/entropix-search/entropix-search/cmd/internal/serve"
	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/model/modeltest/chatgguf"
	"github.com/entropix-search/entropix-search/policy"
)

// startServer serves the model at path on loopback, as entropix-search
// serve does.
func startServer(t *testing.T, path string) string {
	t.Helper()
	m, err := model.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(m, engine.WithCacheTokens(1<<14), engine.WithKVType(m.DefaultKVType()))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(serve.New(m, eng, serve.Config{ModelName: "arith", Policy: policy.DefaultFile()}).Handler())
	t.Cleanup(func() {
		srv.Close()
		if n := eng.BlocksInUse(); n != 0 {
			t.Errorf("%d KV blocks in use after the evaluation", n)
		}
		m.Close()
	})
	return srv.URL
}

// An evaluation spread over two servers gives the report a local one
// gives: the same outputs, scores and rows, whatever the order in which
// the servers batched the searches.
func TestEvalEndpoint(t *testing.T) {
	gguf := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	data := arithFile(t)
	a, b := startServer(t, gguf), startServer(t, gguf)
	dir := t.TempDir()
	args := []string{"eval", "-m", gguf, "-task", "arith", "-data", data, "-budgets", "1x,2x", "-no-speed", "-no-timings"}
	local, remote := filepath.Join(dir, "local.json"), filepath.Join(dir, "remote.json")
	code, outLocal, errs := runCmd(t, append(args, "-json", local)...)
	if code != exitOK {
		t.Fatalf("local: exit %d: %s", code, errs)
	}
	code, outRemote, errs := runCmd(t, append(args, "-json", remote, "-endpoint", a+","+b+"/v1", "-parallel", "3")...)
	if code != exitOK {
		t.Fatalf("remote: exit %d: %s", code, errs)
	}
	if outLocal != outRemote {
		t.Errorf("the reports differ:\n%s\n----\n%s", outLocal, outRemote)
	}
	outputs := func(path string) []map[string]any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Tasks []struct {
				Outputs []map[string]any `json:"outputs"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal(b, &rep); err != nil || len(rep.Tasks) != 1 {
			t.Fatalf("%s: %v", path, err)
		}
		for _, o := range rep.Tasks[0].Outputs {
			st := o["stats"].(map[string]any)
			delete(st, "wall_ns")
			delete(st, "forward_ns")
			delete(st, "kv_blocks_peak") // the peak of the server's shared pool
		}
		return rep.Tasks[0].Outputs
	}
	lo, ro := outputs(local), outputs(remote)
	if len(lo) != 3*2*len(engine.Modes()) || len(lo) != len(ro) {
		t.Fatalf("%d local outputs, %d remote", len(lo), len(ro))
	}
	correct := 0
	for i := range lo {
		l, _ := json.Marshal(lo[i])
		r, _ := json.Marshal(ro[i])
		if string(l) != string(r) {
			t.Errorf("output %d:\nlocal  %s\nremote %s", i, l, r)
		}
		if lo[i]["correct"] == true {
			correct++
		}
	}
	if correct == 0 {
		t.Error("the trained model answered nothing: the comparison checks little")
	}

	// A server that is not there fails the evaluation with its address
	// (after the retries, which a test need not wait for).
	defer func(n int) { endpointRetries = n }(endpointRetries)
	endpointRetries = 0
	code, _, errs = runCmd(t, append(args, "-endpoint", "http://127.0.0.1:1", "-limit", "1", "-modes", "greedy")...)
	if code == exitOK || !strings.Contains(errs, "127.0.0.1:1") {
		t.Errorf("no server: exit %d, %s", code, errs)
	}
	for _, bad := range []string{"ftp://x", "localhost:8080", "http://"} {
		if code, _, _ := runCmd(t, append(args, "-endpoint", bad)...); code != exitUsage {
			t.Errorf("-endpoint %q: exit %d, want usage", bad, code)
		}
	}
}

// speed -m measures a model file and names the weight types it stores.
func TestSpeedOfFile(t *testing.T) {
	gguf := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	t.Setenv("LLAMA_BENCH", "")
	start := time.Now()
	code, out, errs := runCmd(t, "speed", "-m", gguf, "-quick")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"## arith.gguf (F32 in the file) F32", "| single-stream decode", "## Targets"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("%s", time.Since(start))
	if code, _, _ := runCmd(t, "speed", "-m", filepath.Join(t.TempDir(), "absent.gguf")); code == exitOK {
		t.Error("a missing file: exit 0")
	}
}

// With -chat the searches go to /v1/chat/completions, and the report is
// still the local one.
func TestEvalEndpointChat(t *testing.T) {
	path := chatgguf.Write(t, chatgguf.ChatML)
	url := startServer(t, path)
	args := []string{"eval", "-m", path, "-task", "stories", "-chat", "-limit", "3", "-max-tokens", "12",
		"-budgets", "1x,2x", "-modes", "greedy,beam-adaptive,self-consistency", "-no-speed", "-no-timings"}
	code, local, errs := runCmd(t, args...)
	if code != exitOK {
		t.Fatalf("local: exit %d: %s", code, errs)
	}
	code, remote, errs := runCmd(t, append(args, "-endpoint", url)...)
	if code != exitOK {
		t.Fatalf("remote: exit %d: %s", code, errs)
	}
	if local != remote {
		t.Errorf("the reports differ:\n%s\n----\n%s", local, remote)
	}
}
