package tree_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/entropix-search/entropix-search/engine"
	"github.com/entropix-search/entropix-search/model"
	_ "github.com/entropix-search/entropix-search/model/cpu" // the CPU backend
	"github.com/entropix-search/entropix-search/model/modeltest"
	"github.com/entropix-search/entropix-search/policy"
	"github.com/entropix-search/entropix-search/tree"
)

// viewerPage writes the viewer for a real beam-adaptive run on the arith
// model (a problem on which it doubts and forks) and returns its path and
// the tree.
func viewerPage(t *testing.T) (string, *tree.Tree) {
	t.Helper()
	m, err := model.Load(filepath.Join(modeltest.RepoRoot(), "bench", "models", "arith.gguf"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := engine.New(m, engine.WithMode(engine.BeamAdaptive), engine.WithTopProbs(5))
	if err != nil {
		t.Fatal(err)
	}
	prompt := "Question: Fay has 75 eggs. She sells 67 eggs. She buys 4 bags with 9 eggs in each bag. How many eggs does Fay have now?\nAnswer:"
	res, err := e.Search(context.Background(), prompt, engine.Budget{MaxTokens: 192, MaxRows: 276})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := res.Tree.WriteHTML(&b, tree.HTMLOptions{Title: "beam-adaptive · arith", Thresholds: policy.EntropixV1, TokenText: m.Tokenizer.Piece}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tree.html")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, res.Tree
}

// bigPage writes the viewer for a synthetic tree of n nodes: a spine that
// forks into three branches every 25 tokens.
func bigPage(t *testing.T, n int) string {
	t.Helper()
	tr := tree.New("a prompt", []int{1, 2})
	leaf, pending := tree.Root, []tree.ID{}
	for tr.Len() < n {
		leaf = tr.Add(leaf, tree.Node{Token: 5, Text: " w", LogProb: -0.1, Quadrant: policy.LELV})
		if tr.Len()%25 == 0 {
			pending = append(pending, leaf)
		}
		for len(pending) > 0 && tr.Len() < n {
			p := pending[0]
			pending = pending[1:]
			b := p
			for i := 0; i < 12 && tr.Len() < n; i++ {
				b = tr.Add(b, tree.Node{Token: 6, Text: " x", LogProb: -2, Quadrant: policy.Adaptive})
			}
		}
	}
	tr.Commit(leaf)
	var b bytes.Buffer
	if err := tr.WriteHTML(&b, tree.HTMLOptions{Title: "10,000 nodes"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big.html")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWriteHTMLSelfContained(t *testing.T) {
	path, tr := viewerPage(t)
	b, _ := os.ReadFile(path)
	page := string(b)
	// (The SVG namespace URI is a name, not a request.)
	for _, bad := range []string{`src=`, `href=`, `url(`, `@import`, `<link`, `fetch(`, `XMLHttpRequest`, `https://`} {
		if strings.Contains(page, bad) {
			t.Errorf("the page refers to something outside itself: %q", bad)
		}
	}
	if strings.Count(page, "</script>") != 2 || !strings.Contains(page, fmt.Sprintf(`"id":%d`, tr.Len()-1)) {
		t.Error("the tree's JSON is not inside the page whole")
	}
}

// TestViewerInBrowser opens the page in headless Chromium (chromedp): no
// console errors, no network request, as many node elements as the tree
// has nodes, a click opens a fork, hovering a token shows its numbers; it
// saves a screenshot (VIEWER_SCREENSHOT=file keeps it).
func TestViewerInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no Chromium installed (.ci/run installs Debian's chromium)")
	}
	path, tr := viewerPage(t)
	big := bigPage(t, 10000)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()

	var mu sync.Mutex
	var consoleErrs, requests []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			consoleErrs = append(consoleErrs, fmt.Sprintf("%s %+v", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				consoleErrs = append(consoleErrs, fmt.Sprint(ev.Args))
			}
		case *network.EventRequestWillBeSent:
			requests = append(requests, ev.Request.URL)
		}
	}); err != nil {
		t.Fatal(err)
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	check(err)
	_, err = chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
	check(err)
	check(chromedp.Do(ctx, chromedp.Navigate("file://"+path), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))))
	nodeCount, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#tree [data-node]").length`))
	check(err)
	check(chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".fork > .head"), chromedp.NodeVisible)))
	openForks, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".fork.open").length`))
	check(err)
	// A real mouse move onto a token chosen at a fork.
	check(chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS("#text .tok.fork"))))
	xy, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector("#text .tok.fork").getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`))
	check(err)
	check(chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, xy[0], xy[1]), chromedp.Sleep(100*time.Millisecond)))
	tipText, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#tip"), chromedp.NodeVisible))
	check(err)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	check(err)
	// A tree of 10,000 nodes loads, and every node is in the DOM.
	start := time.Now()
	check(chromedp.Do(ctx, chromedp.Navigate("file://"+big), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))))
	bigCount, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#tree [data-node]").length`))
	check(err)
	t.Logf("10,000 nodes: loaded and drawn in %v", time.Since(start))
	if bigCount != 10000 {
		t.Errorf("%d node elements for 10,000 nodes", bigCount)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrs) > 0 {
		t.Errorf("console errors: %v", consoleErrs)
	}
	for _, u := range requests {
		if u != "file://"+path && u != "file://"+big {
			t.Errorf("network request: %s", u)
		}
	}
	if nodeCount != tr.Len() {
		t.Errorf("%d node elements, the tree has %d nodes", nodeCount, tr.Len())
	}
	if openForks != 1 {
		t.Errorf("%d forks open after one click", openForks)
	}
	if !strings.Contains(tipText, "entropy") || !strings.Contains(tipText, "alternatives") {
		t.Errorf("the tooltip shows %q", tipText)
	}
	out := filepath.Join(t.TempDir(), "viewer.png")
	if p := os.Getenv("VIEWER_SCREENSHOT"); p != "" {
		out = p
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil || len(shot) < 10000 {
		t.Errorf("screenshot of %d bytes: %v", len(shot), err)
	}
}
