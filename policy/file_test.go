package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileRoundTrip(t *testing.T) {
	f := DefaultFile()
	f.Fork.MinPHigh, f.Fork.MinPLow = 0.2, 0.02
	f.BackspaceBelow = 0.3
	f.Score = ScoreGroup
	f.Clarify = []int{5, 6} // model-specific: not written
	var b bytes.Buffer
	if err := f.Write(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"clarify"`) {
		t.Errorf("token ids written: %s", b.String())
	}
	g, err := ReadFile(&b)
	if err != nil {
		t.Fatal(err)
	}
	f.Clarify = nil
	if g.Fork != f.Fork || g.BackspaceBelow != f.BackspaceBelow || g.Score != f.Score || g.ClarifyText != f.ClarifyText || g.Thresholds != f.Thresholds {
		t.Errorf("round trip: %+v, want %+v", g, f)
	}
	// A partial file keeps the defaults.
	g, err = ReadFile(strings.NewReader(`{"score": "margin"}`))
	if err != nil || g.Score != ScoreMargin || g.Fork != DefaultFork() {
		t.Errorf("partial file: %+v, %v", g, err)
	}
}

func TestFileErrors(t *testing.T) {
	for _, s := range []string{
		``,
		`{`,
		`{"scor": "margin"}`,
		`{"score": "best"}`,
		`{"fork": {"max_width": 1}}`,
		`{"backspace_below": 2}`,
		`{"clarify": [1, 2]}`,
		`{} {}`,
		`{"base": {"temperature": -1}}`,
		`[1]`,
		`{"fork": {"min_p_high": 1e999}}`,
	} {
		if _, err := ReadFile(strings.NewReader(s)); err == nil {
			t.Errorf("%q read without error", s)
		}
	}
	if _, err := ReadFile(strings.NewReader(`{"clarify_text": "` + strings.Repeat("a", maxFileJSON) + `"}`)); err == nil {
		t.Error("an oversized file was read")
	}
}

func TestSaveFileKeepsOldOnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := DefaultFile()
	bad.Fork.MaxWidth = 0
	if err := SaveFile(path, bad); err == nil {
		t.Fatal("an invalid policy was saved")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("the old file became %q", b)
	}
	if err := SaveFile(path, DefaultFile()); err != nil {
		t.Fatal(err)
	}
	if f, err := LoadFile(path); err != nil || f.Score != ScoreLogProb {
		t.Errorf("load: %+v, %v", f, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
}

func FuzzReadFile(f *testing.F) {
	var b bytes.Buffer
	DefaultFile().Write(&b)
	f.Add(b.Bytes())
	f.Add([]byte(`{"score": "margin", "fork": {"max_width": 3}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ReadFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("read an invalid policy: %v", err)
		}
		var out bytes.Buffer
		if err := p.Write(&out); err != nil {
			t.Fatalf("cannot write what was read: %v", err)
		}
	})
}
