package modeltest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

// The bundled GGUF is in the repository, intact, and the same file as the
// shared one.
func TestBundledStories260K(t *testing.T) {
	p := modeltest.BundledStories260K()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("the bundled model is missing (is %s committed?): %v", modeltest.Bundled, err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != modeltest.BundledSHA256 {
		t.Fatalf("%s: sha256 %s, want %s", p, got, modeltest.BundledSHA256)
	}
	if d := modeltest.SharedDir(); d != "" {
		shared, err := os.ReadFile(filepath.Join(d, filepath.FromSlash(modeltest.Stories260KGGUF)))
		if err != nil {
			t.Skipf("../shared has no stories260K GGUF to compare with: %v", err)
		}
		if !bytes.Equal(shared, b) {
			t.Fatalf("the bundled %s differs from ../shared/%s", modeltest.Bundled, modeltest.Stories260KGGUF)
		}
	}
}

func TestRepoRoot(t *testing.T) {
	root := modeltest.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("RepoRoot %q has no go.mod: %v", root, err)
	}
}

// Without ../shared (ENTROPIX_SHARED naming a directory that does not
// exist), the helpers fall back to the bundled GGUF.
func TestWithoutShared(t *testing.T) {
	t.Setenv("ENTROPIX_SHARED", filepath.Join(t.TempDir(), "absent"))
	if d := modeltest.SharedDir(); d != "" {
		t.Fatalf("SharedDir = %q, want \"\" for a directory that does not exist", d)
	}
	if p, tok := modeltest.Stories260K(t); p != modeltest.BundledStories260K() || tok != "" {
		t.Fatalf("Stories260K = %q, %q; want the bundled GGUF and no tokenizer", p, tok)
	}
	if p := modeltest.Stories260KGGUFPath(t); p != modeltest.BundledStories260K() {
		t.Fatalf("Stories260KGGUFPath = %q, want the bundled GGUF", p)
	}
}

// With ENTROPIX_SHARED naming a directory that holds the files, the
// helpers use them.
func TestWithShared(t *testing.T) {
	d := t.TempDir()
	for _, rel := range []string{modeltest.Stories260KBin, modeltest.Tok512, modeltest.Stories260KGGUF} {
		p := filepath.Join(d, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("ENTROPIX_SHARED", d)
	if got := modeltest.SharedDir(); got != d {
		t.Fatalf("SharedDir = %q, want %q", got, d)
	}
	bin, tok := modeltest.Stories260K(t)
	if bin != filepath.Join(d, filepath.FromSlash(modeltest.Stories260KBin)) || tok != filepath.Join(d, filepath.FromSlash(modeltest.Tok512)) {
		t.Fatalf("Stories260K = %q, %q; want the shared checkpoint and tokenizer", bin, tok)
	}
	if p := modeltest.Stories260KGGUFPath(t); p != filepath.Join(d, filepath.FromSlash(modeltest.Stories260KGGUF)) {
		t.Fatalf("Stories260KGGUFPath = %q, want the shared GGUF", p)
	}
}
