// Package modeltest finds the real model files shared with the project
// (../shared next to the repository) for tests, in the spirit of httptest.
//
// Tests that need them skip with a clear message when ../shared is absent;
// in CI it is always present. The stories260K GGUF is also bundled with the
// repository (bench/models/stories260K.gguf, see BundledStories260K), so
// that tests which need only that model run on a fresh clone too.
//
// To run the tests as a clone without ../shared would, point
// ENTROPIX_SHARED at a directory that does not exist:
//
//	ENTROPIX_SHARED=/nonexistent go test ./...
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
// root), or "" when it is absent. ENTROPIX_SHARED overrides it; a directory
// it names that does not exist counts as absent.
func SharedDir() string {
	d := os.Getenv("ENTROPIX_SHARED")
	if d == "" {
		root := RepoRoot()
		if root == "" {
			return ""
		}
		d = filepath.Join(root, "..", "shared")
	}
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		abs, _ := filepath.Abs(d)
		return abs
	}
	return ""
}

// RepoRoot returns the absolute path of the repository's root, found from
// this source file's own path, or "" when it cannot be told.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	// file is <repo>/model/modeltest/modeltest.go
	abs, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
	if err != nil {
		return ""
	}
	return abs
}

// Bundled is the path of the stories260K GGUF bundled with the repository,
// relative to its root; BundledSHA256 is that file's SHA-256. It is the
// same file as Stories260KGGUF under ../shared.
const (
	Bundled       = "bench/models/stories260K.gguf"
	BundledSHA256 = "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"
)

// BundledStories260K returns the absolute path of the stories260K GGUF
// bundled with the repository (Bundled). Unlike the shared files it is
// always there, so examples, which cannot skip, may load it directly.
func BundledStories260K() string {
	return filepath.Join(RepoRoot(), filepath.FromSlash(Bundled))
}

// Stories260KGGUFPath returns the path of the stories260K GGUF: the shared
// one when ../shared has it, otherwise the bundled one (the same bytes). It
// skips the test when neither is there.
func Stories260KGGUFPath(tb testing.TB) string {
	tb.Helper()
	if d := SharedDir(); d != "" {
		p := filepath.Join(d, filepath.FromSlash(Stories260KGGUF))
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p := BundledStories260K()
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("neither ../shared nor the bundled %s has the stories260K GGUF: %v", Bundled, err)
	}
	return p
}

// Stories260K returns the model and tokenizer files to load stories260K
// from (model.Load(Stories260K(tb))): the llama2.c checkpoint and
// tok512.bin when ../shared has them, otherwise Stories260KGGUFPath and ""
// (its tokenizer is embedded). The two give the same logits bit for bit and
// tokenize alike (model's TestBundledGGUFMatchesCheckpoint); the GGUF
// declares a context of 2048 tokens where the checkpoint has 512.
func Stories260K(tb testing.TB) (modelPath, tokenizerPath string) {
	tb.Helper()
	if d := SharedDir(); d != "" {
		bin := filepath.Join(d, filepath.FromSlash(Stories260KBin))
		tok := filepath.Join(d, filepath.FromSlash(Tok512))
		_, errBin := os.Stat(bin)
		_, errTok := os.Stat(tok)
		if errBin == nil && errTok == nil {
			return bin, tok
		}
	}
	return Stories260KGGUFPath(tb), ""
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
