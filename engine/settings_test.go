package engine

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/policy"
)

// nonDefaultSettings changes every field of DefaultSettings.
func nonDefaultSettings() Settings {
	st := DefaultSettings()
	st.Thresholds.HighEntropy += 0.5
	st.Fork.MaxWidth = 3
	st.ClarifyText = " Hmm,"
	st.Score = policy.ScoreMargin
	st.Mode = SelfConsistency
	st.MaxTokens, st.BudgetRows, st.MaxWidth, st.Width = 64, 300, 6, 5
	st.Seed = 1<<63 + 7
	st.Sampling = Sampling{Temperature: 0.6, TopK: 20, TopP: 0.9, MinP: 0.1, RepeatPenalty: 1.2, RepeatWindow: 32, PresencePenalty: 0.5, FrequencyPenalty: 0.25}
	st.Answer = "last-number"
	st.Stop = []string{"\n\n", "Question:"}
	st.TopProbs, st.IgnoreEOS = 5, true
	return st
}

// TestSettingsJSONRoundTrip writes settings as JSON and reads them back.
func TestSettingsJSONRoundTrip(t *testing.T) {
	for _, st := range []Settings{DefaultSettings(), nonDefaultSettings()} {
		var b bytes.Buffer
		if err := st.Write(&b); err != nil {
			t.Fatal(err)
		}
		got, err := ReadSettings(&b)
		if err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		if !reflect.DeepEqual(got, st) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, st)
		}
	}
	// A superset of the policy file: a policy file is the settings'
	// "policy".
	var pf bytes.Buffer
	if err := nonDefaultSettings().File.Write(&pf); err != nil {
		t.Fatal(err)
	}
	st, err := ReadSettings(strings.NewReader(`{"policy": ` + pf.String() + `}`))
	if err != nil || !reflect.DeepEqual(st.File, nonDefaultSettings().File) {
		t.Errorf("a policy file read as settings: %v, %+v", err, st.File)
	}
	for _, bad := range []string{`{"mode": "nope"}`, `{"max_tokens": 0}`, `{"answer": "first"}`, `{"stop": [""]}`, `{"max_widht": 3}`, `{"clarify": [1]}`, `{} {}`} {
		if _, err := ReadSettings(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: read without error", bad)
		}
	}
}

// TestSettingsOptions checks that Options and Budget give the settings'
// engine options.
func TestSettingsOptions(t *testing.T) {
	st := nonDefaultSettings()
	var o Options
	for _, f := range st.Options() {
		f(&o)
	}
	if o.Mode != st.Mode || o.Seed != st.Seed || !reflect.DeepEqual(o.Policy, st.Config) || o.Score != st.Score ||
		o.ClarifyText != st.ClarifyText || o.Width != st.Width || o.Sampling != st.Sampling ||
		!reflect.DeepEqual(o.StopStrings, st.Stop) || o.TopProbs != st.TopProbs || o.IgnoreEOS != st.IgnoreEOS {
		t.Errorf("options %+v from settings %+v", o, st)
	}
	if a, ok := o.Answer("so the answer is 12. Then 7"); !ok || a != "12" {
		t.Errorf("answer reader: %q, %v", a, ok)
	}
	if b := st.Budget(); b != (Budget{MaxTokens: 64, MaxRows: 300, MaxWidth: 6}) {
		t.Errorf("budget %+v", b)
	}
}

// TestSettingsDefaultAnswer: each mode names its own answer reader.
func TestSettingsDefaultAnswer(t *testing.T) {
	const text = "It is 5, then 7."
	for _, m := range Modes() {
		st := DefaultSettings()
		st.Mode = m
		f := st.AnswerFunc()
		var got string
		if f != nil {
			got, _ = f(text)
		}
		want := ""
		switch m {
		case SelfConsistency, BestOfN:
			want = "7" // last-number
		}
		if reader := m == BeamAdaptive || m == SelfConsistency || m == BestOfN; got != want || reader != (f != nil) {
			t.Errorf("%v: answer %q (reader %v); want %q", m, got, f != nil, want)
		}
	}
}

// FuzzReadSettings: any input is read or refused without a panic, and
// what is read writes and reads back the same.
func FuzzReadSettings(f *testing.F) {
	var b bytes.Buffer
	nonDefaultSettings().Write(&b)
	for _, s := range []string{b.String(), `{}`, `{"mode": "beam"}`, `{"policy": {"score": "margin"}}`, `{"stop": ["a"], "answer": "none"}`, `[`, `{"sampling": {"top_p": 2}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ReadSettings(strings.NewReader(s))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := st.Write(&out); err != nil {
			t.Fatalf("read %q, but writing it: %v", s, err)
		}
		back, err := ReadSettings(&out)
		if err != nil || !reflect.DeepEqual(back, st) {
			t.Fatalf("%q: read back %+v, %v; want %+v", s, back, err, st)
		}
	})
}
