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
