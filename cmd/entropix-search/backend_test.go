package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

// TestBackendFlags: a bad --backend, or --device and --ggml-dir without
// --backend ggml, are usage errors; --backend ggml without the libraries
// is one line saying how to get them; with them (ENTROPIX_GGML_DIR, on
// ggml's CPU device), greedy decoding prints run.c's text (with flash
// attention too), and an unknown
// device is a usage error naming those there are.
func TestBackendFlags(t *testing.T) {
	gg := modeltest.Stories260KGGUFPath(t)
	checkUsageErrors(t, []usageCase{
		{[]string{"-m", gg, "-p", "hi", "--backend", "gpu"}, "want cpu or ggml"},
		{[]string{"-m", gg, "-p", "hi", "--device", "cuda0"}, "give --backend ggml too"},
		{[]string{"serve", "-m", gg, "--ggml-dir", "/x"}, "give --backend ggml too"},
		{[]string{"-m", gg, "-p", "hi", "--flash-attn", "on"}, "give --backend ggml too"},
		{[]string{"-m", gg, "-p", "hi", "--backend", "ggml", "--flash-attn", "yes"}, `--flash-attn "yes": want auto, on or off`},
	})
	run := func(env string, args ...string) (int, string, string) {
		cmd := exec.Command(builtExe, args...)
		cmd.Env = append(os.Environ(), "ENTROPIX_GGML_DIR="+env)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	code, _, errs := run("", "-m", gg, "-p", "Once upon a time", "--backend", "ggml")
	if code != exitFailure || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--ggml-dir") || !strings.Contains(errs, "getlibs.sh") {
		t.Errorf("no libraries: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := run("", "-m", gg, "-p", "hi", "--backend", "ggml", "--ggml-dir", t.TempDir()); code != exitFailure || !strings.Contains(errs, "no libggml-base") {
		t.Errorf("an empty --ggml-dir: exit %d, stderr %q", code, errs)
	}
	dir := os.Getenv("ENTROPIX_GGML_DIR")
	if dir == "" {
		t.Skip("skipped the runs: ENTROPIX_GGML_DIR names no ggml libraries")
	}
	code, out, errs := run(dir, "-m", gg, "-p", "Once upon a time", "-n", "60", "--greedy", "--backend", "ggml", "--device", "cpu", "-t", "1")
	if code != 0 || out != runCText {
		t.Fatalf("--backend ggml: exit %d, stdout %q, stderr %s", code, out, errs)
	}
	// Flash attention on ggml's CPU device: the same text.
	code, out, errs = run(dir, "-m", gg, "-p", "Once upon a time", "-n", "60", "--greedy", "--backend", "ggml", "--device", "cpu", "-t", "1", "--flash-attn", "on")
	if code != 0 || out != runCText {
		t.Fatalf("--backend ggml --flash-attn on: exit %d, stdout %q, stderr %s", code, out, errs)
	}
	if code, _, errs := run(dir, "-m", gg, "-p", "hi", "--backend", "ggml", "--device", "nosuch0"); code != exitUsage || !strings.Contains(errs, `no device "nosuch0" (devices: `) {
		t.Errorf("an unknown device: exit %d, stderr %q", code, errs)
	}
}
