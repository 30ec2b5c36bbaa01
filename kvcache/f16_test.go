package kvcache

import (
	"strings"
	"testing"
)

// TestF16HalvesMemory: an F16 block takes half the bytes of an F32 one, so
// a byte cap holds twice the blocks.
func TestF16HalvesMemory(t *testing.T) {
	cfg := Config{Layers: 3, KVDim: 16, BlockSize: 8, MaxBytes: 1 << 20}
	p32 := newPool(t, cfg)
	cfg.DType = F16
	p16 := newPool(t, cfg)
	s32, s16 := p32.Stats(), p16.Stats()
	if s16.BytesPerBlock*2 != s32.BytesPerBlock || s16.CapBlocks != 2*s32.CapBlocks {
		t.Fatalf("F32 %+v\nF16 %+v", s32, s16)
	}
}

func TestDTypes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want ElemType
	}{{"f32", F32}, {"F16", F16}} {
		if got, err := ParseElemType(c.in); err != nil || got != c.want || !strings.EqualFold(got.String(), c.in) {
			t.Errorf("ParseElemType(%q) = %v, %v", c.in, got, err)
		}
	}
	if _, err := ParseElemType("q8_0"); err == nil || !strings.Contains(err.Error(), "q8_0") {
		t.Errorf("ParseElemType(q8_0): err = %v", err)
	}
	if _, err := New(Config{Layers: 1, KVDim: 4, MaxBlocks: 1, DType: 7}); err == nil || !strings.Contains(err.Error(), "DType") {
		t.Errorf("New with DType 7: err = %v", err)
	}
}
