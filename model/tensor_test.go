package model_test

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

// An F32 tensor is the caller's float32s in place; its rows, F32 view
// and Floats are those values; an F16 tensor's rows and Floats are its
// halves widened.
func TestTensorRows(t *testing.T) {
	w := []float32{1, 2, 3, 4, 5, 6}
	x, err := model.NewF32Tensor(2, 3, w)
	if err != nil {
		t.Fatal(err)
	}
	if x.Type != gguf.F32 || x.RowBytes() != 12 || len(x.Data) != 24 || &x.F32()[0] != &w[0] {
		t.Fatalf("F32 tensor %v, %d bytes a row, %d bytes, not in place", x.Type, x.RowBytes(), len(x.Data))
	}
	row := make([]float32, 3)
	x.Row(row, 1)
	if f, _ := x.Floats(); !slices.Equal(row, w[3:]) || &f[0] != &w[0] {
		t.Errorf("row 1 = %v", row)
	}
	if _, err := model.NewF32Tensor(2, 4, w); err == nil {
		t.Error("a 2x4 tensor of 6 values")
	}
	h := make([]byte, 2*32*2)
	for i := range 64 {
		binary.LittleEndian.PutUint16(h[2*i:], 0x3c00+uint16(i)) // 1 + i/1024
	}
	x16 := &model.Tensor{Type: gguf.F16, Rows: 2, Cols: 32, Data: h}
	if x16.F32() != nil {
		t.Error("an F16 tensor has an F32 view")
	}
	all, err := x16.Floats()
	if err != nil {
		t.Fatal(err)
	}
	row = make([]float32, 32)
	x16.Row(row, 1)
	for i, v := range all {
		if want := 1 + float32(i)/1024; v != want || (i >= 32 && row[i-32] != want) {
			t.Fatalf("value %d: %v (row %v), want %v", i, v, row, want)
		}
	}
	buf := make([]byte, 12) // small allocations may start at any byte
	i := 0
	for uintptr(unsafe.Pointer(&buf[i]))%4 != 1 {
		i++
	}
	if m := (&model.Tensor{Type: gguf.F32, Rows: 1, Cols: 2, Data: buf[i : i+8]}); m.F32() != nil {
		t.Error("an F32 view of unaligned data")
	}
}

// A model refuses tensors of the wrong size or an unsupported type, naming
// the weight.
func TestTensorChecked(t *testing.T) {
	s := synth.Shapes["stories260K"]
	for name, edit := range map[string]func(l *model.Layer){
		"attn_q is Q8_0 tensor of 64x64 needs 4352 bytes": func(l *model.Layer) {
			l.Wq = &model.Tensor{Type: gguf.Q8_0, Rows: l.Wq.Rows, Cols: l.Wq.Cols, Data: make([]byte, 10)}
		},
		"ffn_up: tensor type IQ2_XXS is not supported": func(l *model.Layer) {
			l.W3 = &model.Tensor{Type: gguf.IQ2_XXS, Rows: l.W3.Rows, Cols: l.W3.Cols, Data: l.W3.Data}
		},
	} {
		ts, err := synth.Init(s, 1)
		if err != nil {
			t.Fatal(err)
		}
		m, err := synth.FromTensors(s, ts, nil, "test")
		if err != nil {
			t.Fatal(err)
		}
		w := *m.Weights
		w.Layers = slices.Clone(w.Layers)
		edit(&w.Layers[0])
		_, err = model.New(m.Config, &w, nil, "edited")
		for _, part := range strings.Split(name, " is ") {
			if err == nil || !strings.Contains(err.Error(), part) {
				t.Errorf("%s: error %v", name, err)
			}
		}
	}
}

// closer records its Close.
type closer struct{ closed *int }

func (c closer) Close() error { *c.closed++; return nil }

// BackendState makes a key's value once and hands it to every caller; a
// failed build is tried again; Close closes what the builds returned, and
// after it BackendState fails with ErrClosed.
func TestBackendState(t *testing.T) {
	m, err := synth.Generate(synth.Shapes["stories260K"], kernels.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{}
	builds, closes := 0, 0
	build := func() (any, io.Closer, error) {
		builds++
		if builds == 1 {
			return nil, nil, errors.New("first build fails")
		}
		return &builds, closer{&closes}, nil
	}
	if _, err := m.BackendState(key{}, build); err == nil {
		t.Fatal("the failing build's error was not returned")
	}
	a, err := m.BackendState(key{}, build)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.BackendState(key{}, build)
	other, _ := m.BackendState(struct{ k int }{1}, func() (any, io.Closer, error) { return math.Pi, nil, nil })
	if a != b || builds != 2 || other != math.Pi {
		t.Fatalf("values %v, %v, %v after %d builds", a, b, other, builds)
	}
	if err := m.Close(); err != nil || closes != 1 {
		t.Fatalf("Close: %v, %d closes", err, closes)
	}
	if _, err := m.BackendState(key{}, build); !errors.Is(err, model.ErrClosed) || builds != 2 {
		t.Errorf("after Close: %v, %d builds", err, builds)
	}
}
