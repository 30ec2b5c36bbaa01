// Package modeltest finds the real model files shared with the project
// (../shared next to the repository) for tests, in the spirit of httptest.
//
// Tests that need them skip with a clear message when ../shared is absent;
// in CI it is always present.
package modeltest

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// SharedDir returns the absolute path of ../shared (next to the repository
// root), or "" when it is absent. ENTROPIX_SHARED overrides it.
func SharedDir() string {
	if d := os.Getenv("ENTROPIX_SHARED"); d != "" {
		return d
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	// file is <repo>/model/modeltest/modeltest.go
	d := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared")
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		abs, _ := filepath.Abs(d)
		return abs
	}
	return ""
}

// Dir returns SharedDir, skipping the test when it is absent.
func Dir(tb testing.TB) string {
	tb.Helper()
	d := SharedDir()
	if d == "" {
		tb.Skip("../shared (real models and oracles) is absent next to the repository; skipping")
	}
	return d
}

// Path returns the path of a file under ../shared, skipping the test when
// it is not there.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	d := SharedDir()
	if d == "" {
		tb.Skip("../shared (real models and oracles) is absent next to the repository; skipping")
	}
	p := filepath.Join(d, filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("shared file %s is absent: %v", rel, err)
	}
	return p
}

// Paths of the shared files, relative to ../shared.
const (
	Stories260KBin  = "models/stories260K/stories260K.bin"
	Stories260KGGUF = "models/stories260K/stories260K.gguf"
	Tok512          = "models/stories260K/tok512.bin"
	Llama2Tokenizer = "models/llama2-tokenizer/tokenizer.bin"
	GreedyOracle    = "oracle/stories260K-greedy.json"
	LogitsOracle    = "oracle/stories260K-logits-64.txt"
	TokenizerOracle = "oracle/tokenizer.tsv"
	GSM8K           = "data/gsm8k/test.jsonl"
)

// OracleLogits reads oracle/stories260K-logits-64.txt: run.c's logits
// at each of 64 positions ("pos P token T: l0 l1 ... l511" per line).
func OracleLogits(tb testing.TB) [][]float32 {
	tb.Helper()
	path := Path(tb, LogitsOracle)
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var rows [][]float32
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		_, vals, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			tb.Fatalf("%s:%d: no ':'", path, line)
		}
		fields := strings.Fields(vals)
		row := make([]float32, len(fields))
		for i, s := range fields {
			x, err := strconv.ParseFloat(s, 32)
			if err != nil {
				tb.Fatalf("%s:%d: logit %d: %v", path, line, i, err)
			}
			row[i] = float32(x)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil || len(rows) == 0 {
		tb.Fatalf("%s: %v (%d rows)", path, err, len(rows))
	}
	return rows
}
