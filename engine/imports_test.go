package engine

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

// The search runs on any backend: engine, policy and tree, with all they
// import, name neither the CPU backend (model/cpu) nor its kernels
// (model/kernels), so that a GPU backend plugs in without them.
func TestSearchImportsNoCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	cmd := exec.Command(goTool, "list", "-deps", "./engine", "./policy", "./tree")
	cmd.Dir = modeltest.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/entropix-search/entropix-search/"
	var ours []string
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, module) {
			continue
		}
		ours = append(ours, strings.TrimPrefix(p, module))
		for _, cpu := range []string{"model/cpu", "model/kernels"} {
			if p == module+cpu || strings.HasPrefix(p, module+cpu+"/") {
				t.Errorf("the search imports %s", p)
			}
		}
	}
	if len(ours) < 3 {
		t.Fatalf("go list named %v", ours)
	}
	t.Logf("the search's packages: %s", strings.Join(ours, " "))
}
