package llama2c

import (
	"encoding/binary"
	"strings"
	"testing"
)

func header(v ...int32) []byte {
	b := make([]byte, HeaderSize)
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// tiny builds a valid checkpoint image of the given shape with zeros.
func tiny(dim, hidden, layers, heads, kvHeads, vocab, seq int32) []byte {
	hd := dim / heads
	kv := kvHeads * hd
	n := vocab*dim + layers*(dim+dim*dim+2*kv*dim+dim*dim+dim+3*hidden*dim) + dim + seq*hd
	if vocab < 0 {
		n = -vocab*dim*2 + layers*(dim+dim*dim+2*kv*dim+dim*dim+dim+3*hidden*dim) + dim + seq*hd
	}
	return append(header(dim, hidden, layers, heads, kvHeads, vocab, seq), make([]byte, 4*n)...)
}

func TestParseShapes(t *testing.T) {
	c, err := Parse(tiny(16, 24, 2, 4, 2, 10, 8))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Tied || &c.Output[0] != &c.TokenEmbd[0] || len(c.Wk) != 2*8*16 || len(c.W2) != 2*16*24 {
		t.Fatalf("unexpected layout: tied=%v wk=%d w2=%d", c.Tied, len(c.Wk), len(c.W2))
	}
	u, err := Parse(tiny(16, 24, 2, 4, 2, -10, 8))
	if err != nil {
		t.Fatal(err)
	}
	if u.Tied || u.Vocab != 10 || &u.Output[0] == &u.TokenEmbd[0] {
		t.Fatal("negative vocab must give an untied classifier")
	}
}

func TestParseErrors(t *testing.T) {
	valid := tiny(16, 24, 2, 4, 2, 10, 8)
	cases := map[string]struct {
		data []byte
		want string
	}{
		"empty":      {nil, "shorter than"},
		"gguf":       {append([]byte("GGUF"), make([]byte, 40)...), "GGUF file"},
		"truncated":  {valid[:len(valid)-4], "truncated"},
		"zero dim":   {header(0, 24, 2, 4, 2, 10, 8), "dim = 0"},
		"absurd":     {header(1<<30, 1<<30, 1<<20, 4, 2, 1<<30, 1<<30), "out of range"},
		"heads":      {header(16, 24, 2, 3, 3, 10, 8), "multiple of n_heads"},
		"kv heads":   {header(16, 24, 2, 4, 3, 10, 8), "n_kv_heads"},
		"huge vocab": {header(16, 24, 2, 4, 2, -(1 << 30), 8), "vocab_size"},
	}
	for name, c := range cases {
		_, err := Parse(c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.want)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(tiny(16, 24, 2, 4, 2, 10, 8))
	f.Add(tiny(8, 8, 1, 2, 1, -4, 2))
	f.Add(header(64, 172, 5, 8, 4, 512, 512))
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Copy into a fresh (aligned) buffer, as a file image would be.
		buf := make([]byte, len(data))
		copy(buf, data)
		c, err := Parse(buf)
		if err != nil {
			return
		}
		if len(c.TokenEmbd) != c.Vocab*c.Dim || len(c.FinalNorm) != c.Dim {
			t.Fatalf("inconsistent checkpoint from a header that parsed: %+v", c.Header)
		}
	})
}
