package model

import (
	"strings"
	"testing"
)

func TestChatFormats(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	cases := []struct {
		template string
		format   ChatFormat
		want     string
	}{
		{"{{ '<|start_header_id|>' + message['role'] }}", ChatLlama3,
			"<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"{{'<|im_start|>' + message['role']}}", ChatML,
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"[INST] {{ content }} [/INST]", ChatLlama2, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]"},
		{"<|user|>{{content}}<|end|>", ChatPhi3, "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n"},
		{"<|user|>\n{{ content }}</s>", ChatZephyr, "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n"},
		{"<start_of_turn>user", ChatGemma, "<start_of_turn>user\nBe brief.<end_of_turn>\n<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"},
	}
	for _, c := range cases {
		f, err := DetectChatFormat(c.template)
		if err != nil || f != c.format {
			t.Fatalf("%q: detected %q, %v; want %q", c.template, f, err, c.format)
		}
		got, err := f.Format(msgs)
		if err != nil || got != c.want {
			t.Errorf("%s:\n got %q\nwant %q (%v)", f, got, c.want, err)
		}
	}
	if _, err := DetectChatFormat(""); err == nil || !strings.Contains(err.Error(), "no chat template") {
		t.Errorf("empty template: %v", err)
	}
	if _, err := DetectChatFormat("{{ weird }}"); err == nil {
		t.Error("unknown template accepted")
	}
}

func TestLlama3FreqFactors(t *testing.T) {
	// Llama-3.1's published scaling: factor 8, low 1, high 4, original 8192.
	f := Llama3FreqFactors(128, 500000, 8, 1, 4, 8192)
	if len(f) != 64 {
		t.Fatalf("%d factors", len(f))
	}
	if f[0] != 1 {
		t.Errorf("the highest frequency must be unscaled, got %v", f[0])
	}
	if f[63] != 8 {
		t.Errorf("the lowest frequency must be scaled by the factor, got %v", f[63])
	}
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Fatalf("factors must not decrease with wavelength: f[%d]=%v < f[%d]=%v", i, f[i], i-1, f[i-1])
		}
	}
}
