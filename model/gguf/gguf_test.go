package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/modeltest"
)

const storiesGGUF = "models/stories260K/stories260K.gguf"

func TestStories260K(t *testing.T) {
	f, err := Open(modeltest.Path(t, storiesGGUF))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if f.Version != 3 || f.Alignment != 32 || len(f.KV) != 19 || len(f.Tensors) != 48 {
		t.Fatalf("version %d, alignment %d, %d KVs, %d tensors; want 3, 32, 19, 48",
			f.Version, f.Alignment, len(f.KV), len(f.Tensors))
	}
	if a := f.Architecture(); a != "llama" {
		t.Errorf("architecture %q, want llama", a)
	}
	for key, want := range map[string]uint64{
		"llama.embedding_length":        64,
		"llama.block_count":             5,
		"llama.attention.head_count":    8,
		"llama.attention.head_count_kv": 4,
		"llama.context_length":          2048,
		"llama.feed_forward_length":     172,
		"tokenizer.ggml.bos_token_id":   1,
		"tokenizer.ggml.eos_token_id":   2,
	} {
		if got, ok := f.Uint(key); !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", key, got, ok, want)
		}
	}
	if eps, ok := f.Float("llama.attention.layer_norm_rms_epsilon"); !ok || math.Abs(eps-1e-5) > 1e-9 {
		t.Errorf("rms epsilon = %g, %v", eps, ok)
	}
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) != 512 || tokens[0] != "<unk>" || tokens[1] != "<s>" || tokens[3] != "<0x00>" {
		t.Errorf("tokens: %d, %v, first %q", len(tokens), ok, tokens[:min(4, len(tokens))])
	}
	if scores, ok := f.Float32s("tokenizer.ggml.scores"); !ok || len(scores) != 512 {
		t.Errorf("scores: %d, %v", len(scores), ok)
	}
	types, ok := f.Int32s("tokenizer.ggml.token_type")
	if !ok || len(types) != 512 || types[0] != 2 || types[1] != 3 || types[3] != 6 {
		t.Errorf("token types: %d, %v, %v", len(types), ok, types[:min(4, len(types))])
	}
	if s, _ := f.String("tokenizer.ggml.model"); s != "llama" {
		t.Errorf("tokenizer model %q", s)
	}

	for _, c := range []struct {
		name string
		dims []uint64
	}{
		{"token_embd.weight", []uint64{64, 512}},
		{"output_norm.weight", []uint64{64}},
		{"output.weight", []uint64{64, 512}},
		{"blk.0.attn_q.weight", []uint64{64, 64}},
		{"blk.0.attn_k.weight", []uint64{64, 32}},
		{"blk.4.ffn_down.weight", []uint64{172, 64}},
		{"blk.4.ffn_norm.weight", []uint64{64}},
	} {
		ti, ok := f.Tensor(c.name)
		if !ok {
			t.Errorf("tensor %s missing", c.name)
			continue
		}
		if ti.Type != F32 || !reflect.DeepEqual(ti.Dims, c.dims) || ti.Size != 4*ti.Elements() ||
			uint64(len(f.TensorData(ti))) != ti.Size || ti.Offset%32 != 0 {
			t.Errorf("tensor %s: %+v", c.name, *ti)
		}
	}
	if ti, _ := f.Tensor("token_embd.weight"); ti.Offset != 14176 || f.DataOffset != 14176 {
		t.Errorf("token_embd.weight at %d, data section at %d; want 14176", ti.Offset, f.DataOffset)
	}

	// The norm weights dequantize to finite values; the embedding matches
	// the llama2.c export of the same model, whose table follows a 28-byte
	// header.
	ti, _ := f.Tensor("output_norm.weight")
	norm := make([]float32, ti.Elements())
	if err := Dequantize(ti.Type, f.TensorData(ti), norm); err != nil {
		t.Fatal(err)
	}
	for _, x := range norm {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("output_norm.weight holds %v", x)
		}
	}
	if bin, err := os.ReadFile(filepath.Join(filepath.Dir(modeltest.Path(t, storiesGGUF)), "stories260K.bin")); err == nil {
		emb, _ := f.Tensor("token_embd.weight")
		if !bytes.Equal(f.TensorData(emb), bin[28:28+emb.Size]) {
			t.Error("token_embd.weight differs from the llama2.c checkpoint's embedding table")
		}
		if _, err := Parse(bin); err == nil || !strings.Contains(err.Error(), "llama2.c checkpoint (dim=64, n_layers=5") {
			t.Errorf("Parse(stories260K.bin) = %v, want a llama2.c hint", err)
		}
	}

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.TensorData(ti) != nil {
		t.Error("TensorData after Close is not nil")
	}
}

// TestParseMatchesOpen checks that the in-memory path sees what the mapped one does.
func TestParseMatchesOpen(t *testing.T) {
	path := modeltest.Path(t, storiesGGUF)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if !reflect.DeepEqual(p.KV, o.KV) || !reflect.DeepEqual(p.Tensors, o.Tensors) {
		t.Fatal("Parse and Open disagree")
	}
	for i := range p.Tensors {
		if !bytes.Equal(p.TensorData(&p.Tensors[i]), o.TensorData(&o.Tensors[i])) {
			t.Fatalf("tensor %s data differs", p.Tensors[i].Name)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.gguf")); err == nil || !strings.HasPrefix(err.Error(), "gguf: ") {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(p, []byte("GGUF\x01\x00\x00\x00"), 0o644)
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "bad.gguf: GGUF version 1") {
		t.Errorf("version 1 file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("empty file: %v", err)
	}
}

// testKV holds one value of every kind.
func testKV() []KV {
	return []KV{
		{"general.architecture", String("llama")},
		{"general.name", String("")},
		{"u8", Uint8(200)}, {"i8", Int8(-100)},
		{"u16", Uint16(60000)}, {"i16", Int16(-30000)},
		{"u32", Uint32(4000000000)}, {"i32", Int32(-2000000000)},
		{"u64", Uint64(math.MaxUint64)}, {"i64", Int64(math.MinInt64)},
		{"f32", Float32(1e-5)}, {"f64", Float64(math.Pi)},
		{"yes", Bool(true)}, {"no", Bool(false)},
		{"tokens", Strings([]string{"<unk>", "<s>", "", "héllo"})},
		{"scores", Float32s([]float32{0, -1.5, 3.25})},
		{"types", Int32s([]int32{1, -2, math.MaxInt32})},
		{"ids", Uint32s([]uint32{7, math.MaxUint32})},
		{"empty", Strings(nil)},
		{"empty_f", Float32s(nil)},
	}
}

func testTensors() []WriteTensor {
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + 3)
		}
		return b
	}
	return []WriteTensor{
		{"a", []uint64{3, 2}, F32, seq(24)},
		{"b", []uint64{5}, F16, seq(10)},
		{"c", []uint64{2, 2, 2}, BF16, seq(16)},
		{"d", []uint64{32, 2}, Q8_0, seq(68)},
		{"e", []uint64{64, 1, 1, 1}, Q4_0, seq(36)},
		{"f", []uint64{256}, Q4_K, seq(144)},
	}
}

func writeImage(t testing.TB, kv []KV, ts []WriteTensor) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, kv, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func toWrite(f *File) []WriteTensor {
	ws := make([]WriteTensor, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		ws[i] = WriteTensor{t.Name, t.Dims, t.Type, f.TensorData(t)}
	}
	return ws
}

func TestWriteRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 64, 1} {
		kv, ts := testKV(), testTensors()
		want := uint64(DefaultAlignment)
		if align != 0 {
			kv = append(kv, KV{"general.alignment", Uint32(align)})
			want = uint64(align)
		}
		img := writeImage(t, kv, ts)
		f, err := Parse(img)
		if err != nil {
			t.Fatalf("alignment %d: %v", align, err)
		}
		if f.Version != 3 || f.Alignment != want || f.DataOffset%want != 0 {
			t.Errorf("alignment %d: version %d, alignment %d, data at %d", align, f.Version, f.Alignment, f.DataOffset)
		}
		if !reflect.DeepEqual(f.KV, kv) {
			t.Errorf("alignment %d: KV differ:\n got %v\nwant %v", align, f.KV, kv)
		}
		if len(f.Tensors) != len(ts) {
			t.Fatalf("%d tensors, want %d", len(f.Tensors), len(ts))
		}
		for i, w := range ts {
			g := &f.Tensors[i]
			if g.Name != w.Name || !reflect.DeepEqual(g.Dims, w.Dims) || g.Type != w.Type ||
				g.Offset%want != 0 || !bytes.Equal(f.TensorData(g), w.Data) {
				t.Errorf("alignment %d: tensor %d = %+v, want %s %v %s", align, i, *g, w.Name, w.Dims, w.Type)
			}
		}
		if len(img)%int(want) != 0 {
			t.Errorf("alignment %d: file is %d bytes, not padded", align, len(img))
		}
		if again := writeImage(t, f.KV, toWrite(f)); !bytes.Equal(again, img) {
			t.Errorf("alignment %d: rewriting the parsed file changes it", align)
		}
	}
	// A file with metadata only ends right after it.
	if f, err := Parse(writeImage(t, testKV(), nil)); err != nil || len(f.Tensors) != 0 {
		t.Errorf("metadata-only file: %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	f32 := func(name string, dims ...uint64) WriteTensor {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		return WriteTensor{name, dims, F32, make([]byte, 4*n)}
	}
	for _, c := range []struct {
		kv   []KV
		ts   []WriteTensor
		want string
	}{
		{[]KV{{"k", Uint8(1)}, {"k", Uint8(2)}}, nil, `duplicate key "k"`},
		{[]KV{{"general.alignment", Uint32(48)}}, nil, "power of two"},
		{[]KV{{"general.alignment", Uint64(64)}}, nil, "uint32"},
		{[]KV{{"k", Value{Type: 42}}}, nil, "unknown value type 42"},
		{[]KV{{"k", Value{Type: ValueArray, Elem: ValueArray}}}, nil, "nested"},
		{nil, []WriteTensor{f32("x", 2), f32("x", 2)}, `duplicate tensor name "x"`},
		{nil, []WriteTensor{f32(strings.Repeat("n", 64), 2)}, "longer than 63"},
		{nil, []WriteTensor{f32("x")}, "0 dimensions"},
		{nil, []WriteTensor{f32("x", 1, 1, 1, 1, 1)}, "5 dimensions"},
		{nil, []WriteTensor{{"x", []uint64{4}, F32, make([]byte, 15)}}, "15 bytes of data, want 16"},
		{nil, []WriteTensor{{"x", []uint64{33}, Q8_0, make([]byte, 34)}}, "not a multiple of the Q8_0 block size 32"},
		{nil, []WriteTensor{{"x", []uint64{4}, Type(4), nil}}, "unknown tensor type 4"},
	} {
		var buf bytes.Buffer
		err := Write(&buf, c.kv, c.ts)
		if err == nil || !strings.HasPrefix(err.Error(), "gguf: write: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want error containing %q, got %v", c.want, err)
		}
		if buf.Len() != 0 {
			t.Errorf("%q: wrote %d bytes before failing", c.want, buf.Len())
		}
	}
}

// img builds hand-made, possibly hostile, GGUF images.
type img struct{ bytes.Buffer }

func header(ver uint32, nt, nkv uint64) *img {
	b := &img{}
	b.WriteString("GGUF")
	return b.u32(ver).u64(nt).u64(nkv)
}

func (b *img) u32(x uint32) *img { b.Write(binary.LittleEndian.AppendUint32(nil, x)); return b }
func (b *img) u64(x uint64) *img { b.Write(binary.LittleEndian.AppendUint64(nil, x)); return b }
func (b *img) str(s string) *img { b.u64(uint64(len(s))).WriteString(s); return b }
func (b *img) raw(p ...byte) *img {
	b.Write(p)
	return b
}

// tensor appends a tensor info.
func (b *img) tensor(name string, typ Type, off uint64, dims ...uint64) *img {
	b.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		b.u64(d)
	}
	return b.u32(uint32(typ)).u64(off)
}

// data pads to 32 and appends n bytes of tensor data.
func (b *img) data(n int) []byte {
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	b.Write(make([]byte, n))
	return b.Bytes()
}

func TestBadInput(t *testing.T) {
	arch := func(b *img) *img { return b.str("general.architecture").u32(8).str("llama") }
	const huge = 1 << 40
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "file is 0 bytes, too short"},
		{"short magic", []byte("GGU"), "too short"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), `bad magic "GGML"`},
		{"legacy ggjt", []byte("tjgg\x03\x00\x00\x00"), "legacy GGML/GGJT"},
		{"llama2.c export", []byte("24ka\x02\x00\x00\x00"), "llama2.c checkpoint"},
		{"llama2.c legacy", (&img{}).u32(288).u32(768).u32(6).u32(6).u32(6).u32(0xffff8300).u32(256).Bytes(), "llama2.c checkpoint (dim=288"},
		{"no version", []byte("GGUF\x03"), "truncated version at offset 4"},
		{"version 1", header(1, 0, 0).Bytes(), "version 1 is not supported"},
		{"version 4", header(4, 0, 0).Bytes(), "unsupported GGUF version 4"},
		{"big endian", header(0x03000000, 0, 0).Bytes(), "big-endian"},
		{"no counts", []byte("GGUF\x03\x00\x00\x00\x00\x00"), "truncated tensor count"},
		{"2^31 metadata", header(3, 0, 1<<31).Bytes(), "metadata count 2147483648 cannot fit"},
		{"2^63 metadata", header(3, 0, 1<<63).Bytes(), "cannot fit"},
		{"2^40 tensors", arch(header(3, huge, 1)).Bytes(), "tensor count 1099511627776 cannot fit"},
		{"truncated key", header(3, 0, 1).str("general.architecture").Bytes()[:40], "metadata entry 0 of 1: key length 20 at offset 24 runs past end of file (8 bytes left)"},
		{"key past EOF", header(3, 0, 1).u64(huge).raw(make([]byte, 8)...).Bytes(), "key length 1099511627776 at offset 24 runs past end"},
		{"no value type", header(3, 0, 1).str("kkkkk").raw(4, 0).Bytes(), `metadata entry 0 ("kkkkk"): truncated value type at offset 37`},
		{"unknown value type", header(3, 0, 1).str("k").u32(13).u64(0).Bytes(), `("k"): unknown value type 13`},
		{"truncated value", header(3, 0, 1).str("k").u32(uint32(ValueUint64)).u32(0).Bytes(), "truncated uint64 value"},
		{"string past EOF", header(3, 0, 1).str("k").u32(8).u64(100).raw('x').Bytes(), "string length 100 at offset"},
		{"bad bool", header(3, 0, 1).str("k").u32(7).raw(2).Bytes(), "invalid bool 2"},
		{"2^40 uint32s", header(3, 0, 1).str("k").u32(9).u32(4).u64(huge).u32(1).Bytes(), "array of 1099511627776 uint32 values (4 bytes each) cannot fit"},
		{"2^40 strings", header(3, 0, 1).str("k").u32(9).u32(8).u64(huge).str("a").Bytes(), "array of 1099511627776 strings cannot fit"},
		{"short string array", header(3, 0, 1).str("k").u32(9).u32(8).u64(2).str("a").u64(100).Bytes(), "element 1 of 2: string length 100"},
		{"nested array", header(3, 0, 1).str("k").u32(9).u32(9).u64(1).u32(4).u64(0).Bytes(), "nested arrays"},
		{"bad element type", header(3, 0, 1).str("k").u32(9).u32(77).u64(1).u64(0).Bytes(), "unknown array element type 77"},
		{"bad bool array", header(3, 0, 1).str("k").u32(9).u32(7).u64(3).raw(0, 1, 5).Bytes(), "element 2 of 3: invalid bool 5"},
		{"duplicate key", arch(arch(header(3, 0, 2))).Bytes(), `duplicate key "general.architecture"`},
		{"alignment 0", header(3, 0, 1).str("general.alignment").u32(4).u32(0).Bytes(), "general.alignment 0 (uint32) is not a power of two"},
		{"alignment 48", header(3, 0, 1).str("general.alignment").u32(4).u32(48).Bytes(), "not a power of two"},
		{"alignment string", header(3, 0, 1).str("general.alignment").u32(8).str("32").Bytes(), "general.alignment 32 (string)"},
		{"truncated tensor name", arch(header(3, 1, 1)).u64(5).raw('a', 'b').raw(make([]byte, 20)...).Bytes()[:75], "tensor 0 of 1: truncated tensor name length at offset 69"},
		{"truncated dims", arch(header(3, 1, 1)).str("w").u32(2).u64(4).u64(4).u64(4).Bytes()[:94], `tensor 0 ("w"): truncated dimension at offset 90`},
		{"truncated offset", arch(header(3, 1, 1)).tensor("w", F32, 0, 4).u64(0).Bytes()[:98], `tensor 0 ("w"): truncated data offset at offset 94`},
		{"5 dims", arch(header(3, 1, 1)).tensor("w", F32, 0, 1, 1, 1, 1, 1).data(4), `tensor 0 ("w"): 5 dimensions, at most 4`},
		{"dims overflow", arch(header(3, 1, 1)).tensor("w", F32, 0, 1<<32, 1<<32).data(4), "more than 2^63-1 elements"},
		{"huge dim", arch(header(3, 1, 1)).tensor("w", F32, 0, 0, 1<<63).data(4), "larger than 2^63-1"},
		{"bytes overflow", arch(header(3, 1, 1)).tensor("w", F64, 0, 1<<62).data(4), "more than 2^63-1 bytes"},
		{"unknown type", arch(header(3, 1, 1)).tensor("w", Type(99), 0, 4).data(16), `tensor 0 ("w"): unknown tensor type 99`},
		{"retired type", arch(header(3, 1, 1)).tensor("w", Type(4), 0, 32).data(32), "unknown tensor type 4"},
		{"partial block", arch(header(3, 1, 1)).tensor("w", Q8_0, 0, 48).data(68), "row length 48 is not a multiple of the Q8_0 block size 32"},
		{"quantized scalar", arch(header(3, 1, 1)).tensor("w", Q8_0, 0).data(34), "row length 1 is not a multiple of the Q8_0 block size 32"},
		{"partial Q3_K block", arch(header(3, 1, 1)).tensor("w", Q3_K, 0, 128, 2).data(110), "row length 128 is not a multiple of the Q3_K block size 256"},
		{"partial IQ4_NL block", arch(header(3, 1, 1)).tensor("w", IQ4_NL, 0, 48).data(36), "row length 48 is not a multiple of the IQ4_NL block size 32"},
		{"IQ4_XS past 2^63 elements", arch(header(3, 1, 1)).tensor("w", IQ4_XS, 0, 1<<40, 1<<30).data(136), "more than 2^63-1 elements"},
		{"data past EOF", arch(header(3, 1, 1)).tensor("w", F32, 0, 8).data(31), `tensor 0 ("w"): 32 bytes of data at offset 0 run past the end`},
		{"Q2_K past EOF", arch(header(3, 1, 1)).tensor("w", Q2_K, 0, 256, 2).data(167), `tensor 0 ("w"): 168 bytes of data at offset 0 run past the end`},
		{"huge IQ4_NL past EOF", arch(header(3, 1, 1)).tensor("w", IQ4_NL, 0, 1<<40, 1<<20).data(18), "run past the end"},
		{"offset past EOF", arch(header(3, 1, 1)).tensor("w", F32, 1<<62, 8).data(32), "run past the end"},
		{"no data section", arch(header(3, 1, 1)).tensor("w", F32, 0, 8).Bytes(), "data section holds 0 bytes"},
		{"misaligned", arch(header(3, 1, 1)).tensor("w", F32, 4, 4).data(32), "offset 4 is not a multiple of the alignment 32"},
		{"duplicate tensor", arch(header(3, 2, 1)).tensor("w", F32, 0, 4).tensor("w", F32, 32, 4).data(64), `tensor 1: duplicate name "w"`},
	}
	for _, c := range cases {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, err := Parse(c.data)
		runtime.ReadMemStats(&m1)
		if err == nil || !strings.HasPrefix(err.Error(), "gguf: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing %q, got %v", c.name, c.want, err)
		}
		if n := m1.TotalAlloc - m0.TotalAlloc; n > 64<<10 {
			t.Errorf("%s: parsing %d bytes allocated %d bytes", c.name, len(c.data), n)
		}
	}

	// The valid base the tensor cases mutate does parse.
	good := arch(header(3, 2, 1)).tensor("w", F32, 0, 4).tensor("v", Q8_0, 32, 32, 2).data(32 + 68)
	f, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := f.Tensor("v"); v.Size != 68 || v.Elements() != 64 {
		t.Errorf("tensor v: %+v", *v)
	}
}

// TestTruncated checks that every prefix of a valid image that cuts into
// its tensors is refused.
func TestTruncated(t *testing.T) {
	full := writeImage(t, testKV(), testTensors())
	f, err := Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	last := &f.Tensors[len(f.Tensors)-1]
	for n := range int(last.Offset + last.Size) {
		if _, err := Parse(full[:n]); err == nil {
			t.Fatalf("prefix of %d bytes parsed", n)
		}
	}
}

func TestValueAccessors(t *testing.T) {
	if _, ok := Int32(-1).Uint(); ok {
		t.Error("Uint of -1 succeeded")
	}
	if x, ok := Int8(5).Uint(); !ok || x != 5 {
		t.Error("Uint of int8 5")
	}
	if _, ok := Uint64(math.MaxUint64).Int(); ok {
		t.Error("Int of MaxUint64 succeeded")
	}
	if x, ok := Int16(-7).Int(); !ok || x != -7 {
		t.Error("Int of int16 -7")
	}
	if x, ok := Float32(0.25).Float(); !ok || x != 0.25 {
		t.Error("Float of float32")
	}
	if _, ok := String("1").Uint(); ok {
		t.Error("Uint of a string succeeded")
	}
	if b, ok := Bool(true).Bool(); !ok || !b {
		t.Error("Bool")
	}
	if _, ok := Uint8(1).Bool(); ok {
		t.Error("Bool of uint8 succeeded")
	}
	if _, ok := Uint32s([]uint32{1, math.MaxUint32}).Int32s(); ok {
		t.Error("Int32s of MaxUint32 succeeded")
	}
	if x, ok := Uint32s([]uint32{1, 2}).Int32s(); !ok || !reflect.DeepEqual(x, []int32{1, 2}) {
		t.Error("Int32s of small uint32s")
	}
	if x, ok := Int32s([]int32{-3}).Float32s(); !ok || x[0] != -3 {
		t.Error("Float32s of int32s")
	}
	if _, ok := Strings([]string{"a"}).Float32s(); ok {
		t.Error("Float32s of strings succeeded")
	}
	if _, ok := String("a").Strings(); ok {
		t.Error("Strings of a string succeeded")
	}
	v := Strings([]string{"a", "b"})
	s, _ := v.Strings()
	s[0] = "changed"
	if v.Index(0).String() != "a" || v.Len() != 2 || String("x").Len() != 0 {
		t.Error("Strings does not copy, or Len/Index wrong")
	}
	for v, want := range map[*Value]string{
		ptr(Int64(-5)):                          "-5",
		ptr(Uint16(9)):                          "9",
		ptr(Float32(1e-5)):                      "1e-05",
		ptr(Bool(false)):                        "false",
		ptr(String("hi")):                       "hi",
		ptr(Float32s([]float32{1, 2.5})):        "[1 2.5]",
		ptr(Strings([]string{"a", `"`})):        `["a" "\""]`,
		ptr(Int32s(make([]int32, 10))):          "[0 0 0 0 0 0 0 0 ... (10 elements)]",
		ptr(Value{Type: ValueArray, Elem: 123}): "[]",
	} {
		if got := v.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestTypes(t *testing.T) {
	for _, c := range []struct {
		t          Type
		name       string
		block, siz int
	}{
		{F32, "F32", 1, 4}, {F16, "F16", 1, 2}, {BF16, "BF16", 1, 2},
		{Q4_0, "Q4_0", 32, 18}, {Q8_0, "Q8_0", 32, 34}, {Q4_K, "Q4_K", 256, 144},
		{Q6_K, "Q6_K", 256, 210}, {Q8_K, "Q8_K", 256, 292}, {IQ4_XS, "IQ4_XS", 256, 136},
		{Q2_K, "Q2_K", 256, 84}, {Q3_K, "Q3_K", 256, 110}, {IQ4_NL, "IQ4_NL", 32, 18},
		{IQ2_XXS, "IQ2_XXS", 256, 66}, {IQ2_XS, "IQ2_XS", 256, 74}, {IQ2_S, "IQ2_S", 256, 82},
		{IQ3_XXS, "IQ3_XXS", 256, 98}, {IQ3_S, "IQ3_S", 256, 110}, {IQ1_S, "IQ1_S", 256, 50},
		{IQ1_M, "IQ1_M", 256, 56},
		{TQ1_0, "TQ1_0", 256, 54}, {MXFP4, "MXFP4", 32, 17},
		{Type(4), "Type(4)", 0, 0}, {Type(31), "Type(31)", 0, 0}, {Type(1 << 31), "Type(2147483648)", 0, 0},
	} {
		if c.t.String() != c.name || c.t.BlockSize() != c.block || c.t.TypeSize() != c.siz {
			t.Errorf("%d: %s %d %d, want %s %d %d", uint32(c.t), c.t, c.t.BlockSize(), c.t.TypeSize(), c.name, c.block, c.siz)
		}
	}
	if ValueFloat32.String() != "float32" || ValueType(99).String() != "ValueType(99)" {
		t.Error("ValueType names")
	}
}

func BenchmarkParseStories260K(b *testing.B) {
	data, err := os.ReadFile(modeltest.Path(b, storiesGGUF))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(14176) // the metadata and tensor infos; tensor data is not read
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMissingKeysAreAbsent(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, []KV{{Key: "a.n", Value: Uint32(7)}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := f.Uint("a.n"); !ok || v != 7 {
		t.Fatalf("Uint(a.n) = %d, %v", v, ok)
	}
	if _, ok := f.Uint("missing"); ok {
		t.Error("Uint of a missing key reports ok")
	}
	if _, ok := f.Int("missing"); ok {
		t.Error("Int of a missing key reports ok")
	}
	if _, ok := f.Float("missing"); ok {
		t.Error("Float of a missing key reports ok")
	}
	if _, ok := f.Bool("missing"); ok {
		t.Error("Bool of a missing key reports ok")
	}
}
