package model

import (
	"slices"
	"strings"
	"testing"

	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// qwenTemplate is the ChatML template Qwen2 GGUF files carry (abridged: the
// tool-calling branches left out), with a system default and the
// add_generation_prompt switch.
const qwenTemplate = `{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}{%- else %}{{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{%- endif %}{%- for message in messages %}{%- if message.role == "user" or (message.role == "system" and not loop.first) or message.role == "assistant" %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

// chatModel is a model whose tokenizer knows ChatML's control tokens; only
// its tokenizer and template matter here.
func chatModel(t *testing.T, template string) *Model {
	t.Helper()
	v := tokenizer.NewLlamaVocab()
	for _, c := range "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,!?' " {
		v.Add(strings.ReplaceAll(string(c), " ", "▁"), tokenizer.TypeNormal, 0)
	}
	v.Add("<|im_start|>", tokenizer.TypeControl, 0)
	v.Add("<|im_end|>", tokenizer.TypeControl, 0)
	tok, err := tokenizer.New(*v)
	if err != nil {
		t.Fatal(err)
	}
	return &Model{Tokenizer: tok, ChatTemplate: template}
}

// The model's own Jinja template renders system and multi-turn
// conversations (issue 19: only six families were matched by substring,
// user turn only), and its special-token text becomes those tokens.
func TestRenderChatJinja(t *testing.T) {
	m := chatModel(t, qwenTemplate)
	msgs := []Message{{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}}
	got, err := m.RenderChat(msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
	ids, stops, err := m.EncodeChat(msgs[1:2])
	if err != nil {
		t.Fatal(err)
	}
	start, _ := specialToken(m.Tokenizer, "<|im_start|>")
	end, _ := specialToken(m.Tokenizer, "<|im_end|>")
	if n := strings.Count(m.Tokenizer.Decode(ids), "im_start"); n != 0 || ids[0] != m.Tokenizer.BOS() || ids[1] != start {
		t.Errorf("ids %v: special tokens not parsed (%d as text)", ids[:4], n)
	}
	if !slices.Contains(stops, end) || !slices.Contains(stops, m.Tokenizer.EOS()) {
		t.Errorf("stops %v, want <|im_end|> %d and EOS", stops, end)
	}
	// raise_exception is the template's way to refuse.
	strict := chatModel(t, `{% if messages[0]['role'] != 'user' %}{{ raise_exception('first must be user') }}{% endif %}{{ messages[0]['content'] }}`)
	if _, err := strict.RenderChat([]Message{{"assistant", "x"}}, true); err == nil || !strings.Contains(err.Error(), "first must be user") {
		t.Errorf("raise_exception: %v", err)
	}
	// A template that does not compile is an error, or the built-in
	// format of its family when it has one.
	if _, _, err := chatModel(t, "{% for %}").EncodeChat(msgs); err == nil {
		t.Error("a broken template rendered")
	}
	if _, _, err := chatModel(t, "{% for %}<|im_start|>").EncodeChat(msgs); err != nil {
		t.Errorf("a broken ChatML template did not fall back: %v", err)
	}
}
