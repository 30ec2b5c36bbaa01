package train

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/entropix-search/entropix-search/model/synth"
)

// A checkpoint file is: the magic "ENTXCKP1"; a uint32 length and that
// many bytes of JSON (CheckpointHeader); for each tensor in the header's
// order its values, then the optimizer's two moments, float32
// little-endian; and a CRC-32 (IEEE) of everything before it.
const checkpointMagic = "ENTXCKP1"

// maxHeader bounds the JSON header of a checkpoint.
const maxHeader = 1 << 20

// CheckpointHeader describes a checkpoint.
type CheckpointHeader struct {
	Shape   synth.Shape       `json:"shape"`
	Step    int               `json:"step"`   // steps done
	AdamT   int               `json:"adam_t"` // optimizer steps taken
	Run     json.RawMessage   `json:"run"`    // the training run's settings, as the caller saved them
	Tensors []checkpointEntry `json:"tensors"`
}

type checkpointEntry struct {
	Name       string `json:"name"`
	Rows, Cols int
	Vec        bool `json:"vec,omitempty"`
}

// SaveCheckpoint writes the model, the optimizer's state and the step to
// path atomically: a temporary file in the same folder, synced, then
// renamed over path. run is stored as given (the caller's settings).
func SaveCheckpoint(path string, m *Model, o *AdamW, step int, run any) (err error) {
	rb, err := json.Marshal(run)
	if err != nil {
		return fmt.Errorf("train: checkpoint settings: %w", err)
	}
	h := CheckpointHeader{Shape: m.Shape, Step: step, AdamT: o.t, Run: rb}
	for _, t := range m.tensors {
		h.Tensors = append(h.Tensors, checkpointEntry{Name: t.Name, Rows: t.Rows, Cols: t.Cols, Vec: t.Vec})
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("train: checkpoint header: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name()) // ours: never the user's path
		}
	}()
	crc := crc32.NewIEEE()
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	w.WriteString(checkpointMagic)
	binary.Write(w, binary.LittleEndian, uint32(len(hb)))
	w.Write(hb)
	var buf [4]byte
	floats := func(x []float32) {
		for _, v := range x {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
			w.Write(buf[:])
		}
	}
	for k, t := range m.tensors {
		floats(t.W)
		floats(o.m[k])
		floats(o.v[k])
	}
	if err = w.Flush(); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	binary.LittleEndian.PutUint32(buf[:], crc.Sum32())
	if _, err = f.Write(buf[:]); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	return nil
}

// LoadCheckpoint reads a checkpoint: the model, the optimizer (with the
// given weight decay) and the header. Every size is checked against the
// file before anything is allocated for it, and the checksum before
// anything is returned.
func LoadCheckpoint(path string, weightDecay float64) (*Model, *AdamW, *CheckpointHeader, error) {
	m, o, h, err := loadCheckpoint(path, weightDecay)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	return m, o, h, nil
}

func loadCheckpoint(path string, weightDecay float64) (*Model, *AdamW, *CheckpointHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, nil, errors.New("not a regular file")
	}
	size := st.Size()
	crc := crc32.NewIEEE()
	r := bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, max(0, size-4)), crc), 1<<20)
	var magic [8]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || string(magic[:]) != checkpointMagic {
		return nil, nil, nil, errors.New("not a checkpoint (bad magic)")
	}
	var hl uint32
	if err := binary.Read(r, binary.LittleEndian, &hl); err != nil {
		return nil, nil, nil, fmt.Errorf("header length: %w", err)
	}
	if hl > maxHeader || int64(hl) > size {
		return nil, nil, nil, fmt.Errorf("header of %d bytes", hl)
	}
	hb := make([]byte, hl)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, nil, nil, fmt.Errorf("header: %w", err)
	}
	var h CheckpointHeader
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, nil, nil, fmt.Errorf("header: %w", err)
	}
	if err := h.Shape.Validate(); err != nil {
		return nil, nil, nil, err
	}
	if h.Step < 0 || h.AdamT < 0 {
		return nil, nil, nil, fmt.Errorf("step %d, optimizer step %d", h.Step, h.AdamT)
	}
	var values int64
	for _, e := range h.Tensors {
		if e.Rows <= 0 || e.Cols <= 0 || int64(e.Rows)*int64(e.Cols) > size {
			return nil, nil, nil, fmt.Errorf("tensor %q of %dx%d", e.Name, e.Rows, e.Cols)
		}
		values += int64(e.Rows) * int64(e.Cols)
	}
	if want := 8 + 4 + int64(hl) + 12*values + 4; size != want {
		return nil, nil, nil, fmt.Errorf("%d bytes, want %d for its tensors (truncated or corrupt)", size, want)
	}
	read := func(n int) ([]float32, error) {
		b := make([]byte, 4*n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return x, nil
	}
	ts := make([]synth.Tensor, len(h.Tensors))
	var ms, vs [][]float32
	for i, e := range h.Tensors {
		n := e.Rows * e.Cols
		w, err := read(n)
		if err != nil {
			return nil, nil, nil, err
		}
		mm, err := read(n)
		if err != nil {
			return nil, nil, nil, err
		}
		vv, err := read(n)
		if err != nil {
			return nil, nil, nil, err
		}
		ts[i] = synth.Tensor{Name: e.Name, Rows: e.Rows, Cols: e.Cols, Vec: e.Vec, Values: w}
		ms, vs = append(ms, mm), append(vs, vv)
	}
	var sum [4]byte
	if _, err := io.ReadFull(f, sum[:]); err != nil {
		return nil, nil, nil, fmt.Errorf("checksum: %w", err)
	}
	if binary.LittleEndian.Uint32(sum[:]) != crc.Sum32() {
		return nil, nil, nil, errors.New("checksum mismatch (corrupt)")
	}
	m, err := FromTensors(h.Shape, ts)
	if err != nil {
		return nil, nil, nil, err
	}
	o := NewAdamW(m.tensors, weightDecay)
	o.m, o.v, o.t = ms, vs, h.AdamT
	return m, o, &h, nil
}
