package model_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// writeFile writes data to a temporary file and returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// rewriteGGUF copies the stories260K GGUF, letting edit change its
// metadata and tensors.
func rewriteGGUF(t *testing.T, edit func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)) []byte {
	t.Helper()
	f, err := gguf.Open(modeltest.Stories260KGGUFPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv := append([]gguf.KV(nil), f.KV...)
	var ts []gguf.WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: bytes.Clone(f.TensorData(ti))})
	}
	kv, ts = edit(kv, ts)
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kv, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type badLoad struct {
	name, path, tok, want string
}

func checkBadLoads(t *testing.T, cases []badLoad) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := model.Load(c.path, c.tok)
			if err == nil {
				m.Close()
				t.Fatalf("Load succeeded, want an error containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

// Bad GGUF files (made from the stories260K GGUF, shared or bundled) and
// files in no known format are refused with a clear error.
func TestLoadBadInput(t *testing.T) {
	ggufData, err := os.ReadFile(modeltest.Stories260KGGUFPath(t))
	if err != nil {
		t.Fatal(err)
	}
	setArch := func(arch string) func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			for i := range kv {
				if kv[i].Key == "general.architecture" {
					kv[i].Value = gguf.String(arch)
				}
			}
			return kv, ts
		}
	}
	dropTensor := func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return kv, ts[:len(ts)-1]
	}
	q8Norm := func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range ts {
			if ts[i].Name == "blk.0.attn_q.weight" {
				ts[i].Type = gguf.MXFP4 // a real ggml type we do not bind
				ts[i].Data = ts[i].Data[:64*64/32*17]
			}
		}
		return kv, ts
	}
	blocks := func(n uint32) func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			for i := range kv {
				if kv[i].Key == "llama.block_count" {
					kv[i].Value = gguf.Uint32(n)
				}
			}
			return kv, ts
		}
	}
	// Tensors renamed in a real file: the missing ones past the first few
	// are one line with a count.
	dropMany := func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := 3; i < 23; i++ {
			ts[i].Name = fmt.Sprintf("junk.%d", i)
		}
		return kv, ts
	}
	checkBadLoads(t, []badLoad{
		// A crafted block count must not size anything (2,000,000 once
		// took 6.4 GB and ended the process).
		{"huge block count", writeFile(t, "blocks.gguf", rewriteGGUF(t, blocks(2_000_000))), "", "block_count 2000000, but the file holds"},
		{"block count past the tensors", writeFile(t, "blocks6.gguf", rewriteGGUF(t, blocks(6))), "", "block_count 6, but the file holds 48 tensors"},
		{"many missing tensors", writeFile(t, "many.gguf", rewriteGGUF(t, dropMany)), "", "more missing tensors"},
		{"missing file", filepath.Join(t.TempDir(), "nope.gguf"), "", "no such file"},
		{"empty file", writeFile(t, "empty.bin", nil), "", "too short"},
		{"wrong magic", writeFile(t, "junk.bin", []byte("not a model at all, just some text\n")), "", "out of range"},
		{"truncated GGUF", writeFile(t, "trunc.gguf", ggufData[:len(ggufData)-100]), "", "gguf"},
		{"GGUF header only", writeFile(t, "head.gguf", ggufData[:24]), "", "gguf"},
		{"unknown architecture", writeFile(t, "neox.gguf", rewriteGGUF(t, setArch("gptneox"))), "", `architecture "gptneox" is not supported`},
		{"missing tensor", writeFile(t, "missing.gguf", rewriteGGUF(t, dropTensor)), "", "missing tensor"},
		{"unsupported tensor type", writeFile(t, "mxfp4.gguf", rewriteGGUF(t, q8Norm)), "", "MXFP4 is not supported"},
	})
}

// Bad llama2.c checkpoints and tokenizers (made from the shared
// stories260K.bin, tok512.bin and Llama 2 tokenizer) are refused with a
// clear error.
func TestLoadBadInputLlama2C(t *testing.T) {
	bin, err := os.ReadFile(modeltest.Path(t, modeltest.Stories260KBin))
	if err != nil {
		t.Fatal(err)
	}
	tok512 := modeltest.Path(t, modeltest.Tok512)
	llama2Tok := modeltest.Path(t, modeltest.Llama2Tokenizer)
	checkBadLoads(t, []badLoad{
		{"empty file, a tokenizer", writeFile(t, "empty.bin", nil), tok512, "too short"},
		{"wrong magic, a tokenizer", writeFile(t, "junk.bin", []byte("not a model at all, just some text\n")), tok512, "out of range"},
		{"truncated llama2.c", writeFile(t, "trunc.bin", bin[:len(bin)/2]), tok512, "truncated"},
		{"wrong tokenizer", modeltest.Path(t, modeltest.Stories260KBin), llama2Tok, "512"},
		{"no tokenizer", writeFile(t, "alone.bin", bin), "", "tokenizer"},
	})
}

// Forward refuses bad rows without touching the cache, and a context
// overflow is a typed error.
func TestForwardBadRows(t *testing.T) {
	m := loadStories(t)
	kv, err := m.NewCache(4096, 16, kvcache.F32)
	if err != nil {
		t.Fatal(err)
	}
	r := cpu.NewRunner(m, cpu.NewCache(kv))
	seq := kv.NewSeq()
	if _, err := r.Forward(nil); err == nil {
		t.Error("empty batch accepted")
	}
	if _, err := r.Forward([]model.Row{{Seq: seq, Token: m.Config.Vocab}}); err == nil {
		t.Error("token past the vocabulary accepted")
	}
	if _, err := r.Forward([]model.Row{{Seq: seq, Token: 1}}, m.Config.Layers); err == nil {
		t.Error("attention of a layer that does not exist accepted")
	}
	if seq.Len() != 0 {
		t.Fatalf("a refused batch changed the sequence (len %d)", seq.Len())
	}
	rows := make([]model.Row, m.Config.ContextLen+1)
	for i := range rows {
		rows[i] = model.Row{Seq: seq, Token: 1, NoLogits: true}
	}
	if _, err := r.Forward(rows); !errorsIs(err, model.ErrContextFull) {
		t.Fatalf("overflowing the context: %v, want ErrContextFull", err)
	}
	if seq.Len() != 0 || kv.Stats().BlocksInUse != 0 {
		t.Fatalf("a failed batch was not rolled back: len %d, %d blocks", seq.Len(), kv.Stats().BlocksInUse)
	}
}

func errorsIs(err, target error) bool { return err != nil && errors.Is(err, target) }
