package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// File is a search policy as a file: every knob of the entropix policy
// (Config: thresholds, fork cut and width, backspace bound, clarify
// cooldown, ...), the path score and the clarify text. It is what
// `entropix-search --calibrate` writes, `--policy` reads and
// `--print-policy` prints, as JSON with Config's fields at the top level.
type File struct {
	Config
	// Score weighs the finished paths of beam-adaptive.
	Score ScoreKind `json:"score"`
	// ClarifyText is the text HELV inserts, tokenized for the model when
	// the policy is used ("-": none). Config.Clarify is not written.
	ClarifyText string `json:"clarify_text"`
}

// maxFileJSON bounds a policy file.
const maxFileJSON = 1 << 20

// DefaultFile is the default policy: DefaultConfig in search mode, the
// path's probability as its score, DefaultClarifyText.
func DefaultFile() File {
	c := DefaultConfig()
	c.Mode = Search
	return File{Config: c, Score: ScoreLogProb, ClarifyText: DefaultClarifyText}
}

// Validate checks every field.
func (f *File) Validate() error {
	if err := f.Config.Validate(); err != nil {
		return err
	}
	if _, err := f.Score.MarshalText(); err != nil {
		return err
	}
	return nil
}

// Write writes f as indented JSON.
func (f File) Write(w io.Writer) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("policy file: %w", err)
	}
	f.Clarify = nil
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("policy file: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadFile reads and validates a policy written by File.Write. Fields it
// leaves out keep DefaultFile's values; unknown fields are an error (a
// misspelt knob would silently keep its default).
func ReadFile(r io.Reader) (File, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxFileJSON+1))
	if err != nil {
		return File{}, fmt.Errorf("policy file: %w", err)
	}
	if len(b) > maxFileJSON {
		return File{}, fmt.Errorf("policy file: larger than %d bytes", maxFileJSON)
	}
	f := DefaultFile()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("policy file: %w", err)
	}
	if dec.More() {
		return File{}, errors.New("policy file: more than one JSON value")
	}
	if len(f.Clarify) > 0 {
		return File{}, errors.New("policy file: clarify token ids are model-specific: give clarify_text")
	}
	if err := f.Validate(); err != nil {
		return File{}, fmt.Errorf("policy file: %w", err)
	}
	return f, nil
}

// LoadFile reads the policy file at path.
func LoadFile(path string) (File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("load policy: %w", err)
	}
	defer fh.Close()
	f, err := ReadFile(fh)
	if err != nil {
		return File{}, fmt.Errorf("load %s: %w", path, err)
	}
	return f, nil
}

// SaveFile writes f to path atomically: a temporary file in the same
// folder, synced, then renamed over path, so that a failure (a full disk)
// leaves any earlier file whole.
func SaveFile(path string, f File) error {
	var b bytes.Buffer
	if err := f.Write(&b); err != nil {
		return err
	}
	return saveAtomic(path, b.Bytes())
}
