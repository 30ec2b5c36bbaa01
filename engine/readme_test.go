package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

// The README's library example is a complete program: this test builds
// and runs exactly the block under "## As a library" (issue 19: it did not
// compile).
func TestREADMEExample(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a program")
	}
	root := modeltest.RepoRoot()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## As a library\n")
	if !ok {
		t.Fatal("README has no \"## As a library\" section")
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal("no Go block in the library section")
	}
	// Inside the module (so that it builds against this checkout); a
	// leading underscore keeps it out of ./... patterns.
	dir, err := os.MkdirTemp(root, "_readme_example")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(block[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./"+filepath.Base(dir))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run of the README example: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "Lily wanted to") || !strings.Contains(string(out), "digraph") {
		t.Errorf("the README example printed:\n%.300s", out)
	}
}
