package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/policy"
)

// postCompletion posts a completion request with the entropix object x and
// returns the status and the decoded body.
func postCompletion(t *testing.T, url string, x map[string]any) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": fay, "max_tokens": 120, "seed": 3, "entropix": x})
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestVerifierField: a request that asks for a verifier the server lacks is
// a 400 naming the field; on a server with one, the paths come back with
// its verdicts unless the request turns it off.
func TestVerifierField(t *testing.T) {
	arith := filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf")
	_, url := start(t, arith, Config{ModelName: "arith"})
	code, out := postCompletion(t, url, map[string]any{"mode": "beam-adaptive", "verifier": true})
	if code != http.StatusBadRequest || !strings.Contains(toJSON(out), "entropix.verifier") {
		t.Errorf("verifier asked of a server without one: %d %v", code, out)
	}

	m, err := model.Load(arith, "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v, err := engine.NewVerifier(m, "Y", "N") // untrained, of the right vocabulary
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(m, engine.WithCacheTokens(1<<14), engine.WithVerifier(v))
	if err != nil {
		t.Fatal(err)
	}
	srv := New(m, eng, Config{ModelName: "arith", Policy: policy.DefaultFile()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	vurl := "http://" + ln.Addr().String()
	for _, on := range []bool{true, false} {
		code, out := postCompletion(t, vurl, map[string]any{"mode": "self-consistency", "max_width": 3, "verifier": on})
		if code != http.StatusOK {
			t.Fatalf("verifier %v: %d %v", on, code, out)
		}
		x := out["entropix"].([]any)[0].(map[string]any)
		paths := x["paths"].([]any)
		judged := 0
		for _, p := range paths {
			if _, ok := p.(map[string]any)["verified"]; ok {
				judged++
			}
		}
		if (judged > 0) != on || len(paths) != 3 {
			t.Errorf("verifier %v: %d of %d paths judged", on, judged, len(paths))
		}
	}
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
