package model

import (
	"slices"
	"time"

	"errors"
	"fmt"
	"github.com/ardanlabs/jinja"

	"github.com/entropix-search/entropix-search/model/tokenizer"
	"strings"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // "system", "user", "assistant" or "tool"
	Content string `json:"content"`
}

// ChatFormat is a family of chat templates.
type ChatFormat string

const (
	ChatLlama3 ChatFormat = "llama3" // <|start_header_id|>role<|end_header_id|>
	ChatML     ChatFormat = "chatml" // <|im_start|>role (Qwen, SmolLM, ...)
	ChatLlama2 ChatFormat = "llama2" // [INST] ... [/INST] (Llama 2, Mistral)
	ChatPhi3   ChatFormat = "phi3"   // <|user|> ... <|end|>
	ChatZephyr ChatFormat = "zephyr" // <|user|> ... </s> (TinyLlama-chat)
	ChatGemma  ChatFormat = "gemma"  // <start_of_turn>role
)

// DetectChatFormat recognises the family of a GGUF file's Jinja chat
// template by its markers, as llama.cpp's built-in formatter does; running
// arbitrary Jinja is out of scope.
func DetectChatFormat(template string) (ChatFormat, error) {
	t := template
	switch {
	case t == "":
		return "", errors.New("model: the model carries no chat template")
	case strings.Contains(t, "<|start_header_id|>"):
		return ChatLlama3, nil
	case strings.Contains(t, "<|im_start|>"):
		return ChatML, nil
	case strings.Contains(t, "<start_of_turn>"):
		return ChatGemma, nil
	case strings.Contains(t, "<|user|>") && strings.Contains(t, "<|end|>"):
		return ChatPhi3, nil
	case strings.Contains(t, "<|user|>"):
		return ChatZephyr, nil
	case strings.Contains(t, "[INST]"):
		return ChatLlama2, nil
	}
	return "", fmt.Errorf("model: unrecognised chat template (known: llama3, chatml, llama2, phi3, zephyr, gemma): %.80q", t)
}

// EndOfTurn is the text of the token that ends an assistant turn.
func (f ChatFormat) EndOfTurn() string {
	switch f {
	case ChatLlama3:
		return "<|eot_id|>"
	case ChatML:
		return "<|im_end|>"
	case ChatPhi3:
		return "<|end|>"
	case ChatGemma:
		return "<end_of_turn>"
	}
	return "</s>"
}

// Format renders msgs and opens the assistant's turn. The result holds
// special-token text: encode it with the tokenizer's EncodeSpecial. The
// beginning-of-text token is left to the tokenizer.
func (f ChatFormat) Format(msgs []Message) (string, error) {
	var b strings.Builder
	switch f {
	case ChatLlama3:
		for _, m := range msgs {
			fmt.Fprintf(&b, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", m.Role, strings.TrimSpace(m.Content))
		}
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	case ChatML:
		for _, m := range msgs {
			fmt.Fprintf(&b, "<|im_start|>%s\n%s<|im_end|>\n", m.Role, m.Content)
		}
		b.WriteString("<|im_start|>assistant\n")
	case ChatPhi3, ChatZephyr:
		end := f.EndOfTurn()
		for _, m := range msgs {
			fmt.Fprintf(&b, "<|%s|>\n%s%s\n", m.Role, m.Content, end)
		}
		b.WriteString("<|assistant|>\n")
	case ChatGemma:
		for _, m := range msgs {
			role := m.Role
			if role == "assistant" {
				role = "model"
			}
			if role == "system" { // Gemma has no system turn: fold it into the user's.
				role = "user"
			}
			fmt.Fprintf(&b, "<start_of_turn>%s\n%s<end_of_turn>\n", role, m.Content)
		}
		b.WriteString("<start_of_turn>model\n")
	case ChatLlama2:
		sys := ""
		for _, m := range msgs {
			switch m.Role {
			case "system":
				sys = "<<SYS>>\n" + m.Content + "\n<</SYS>>\n\n"
			case "user":
				fmt.Fprintf(&b, "[INST] %s%s [/INST]", sys, strings.TrimSpace(m.Content))
				sys = ""
			default:
				fmt.Fprintf(&b, " %s </s><s>", strings.TrimSpace(m.Content))
			}
		}
	default:
		return "", fmt.Errorf("model: unknown chat format %q", f)
	}
	return b.String(), nil
}

// RenderChat renders msgs through the model's own chat template (the
// GGUF's tokenizer.chat_template, Jinja, with github.com/ardanlabs/jinja),
// opening the assistant's turn when addGenerationPrompt is set. The
// template sees messages, add_generation_prompt, bos_token, eos_token,
// raise_exception and strftime_now, as llama.cpp and transformers provide
// them. The result holds special-token text: encode it with EncodeSpecial.
func (m *Model) RenderChat(msgs []Message, addGenerationPrompt bool) (string, error) {
	if m.ChatTemplate == "" {
		return "", errors.New("model: the model carries no chat template")
	}
	t, err := jinja.Compile(m.ChatTemplate)
	if err != nil {
		return "", fmt.Errorf("model: chat template: %w", err)
	}
	list := make([]map[string]any, len(msgs))
	for i, msg := range msgs {
		list[i] = map[string]any{"role": msg.Role, "content": msg.Content}
	}
	tok := m.Tokenizer
	data := map[string]jinja.Value{
		"messages":              jinja.FromGoValue(list),
		"add_generation_prompt": jinja.NewBool(addGenerationPrompt),
		"bos_token":             jinja.NewString(tok.Token(tok.BOS())),
		"eos_token":             jinja.NewString(tok.Token(tok.EOS())),
		"raise_exception": jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			msg := "raise_exception"
			if len(args) > 0 {
				msg = args[0].String()
			}
			return jinja.Undefined(), fmt.Errorf("the chat template refused the messages: %s", msg)
		}),
		"strftime_now": jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			return jinja.NewString(strftime(time.Now(), args)), nil
		}),
	}
	out, err := t.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("model: chat template: %w", err)
	}
	return out, nil
}

// strftime formats now with the few directives chat templates use
// ("%d %b %Y" in Llama 3.1's); others are left as they are.
func strftime(now time.Time, args []jinja.Value) string {
	if len(args) == 0 {
		return now.Format("02 Jan 2006")
	}
	r := strings.NewReplacer("%d", now.Format("02"), "%b", now.Format("Jan"), "%B", now.Format("January"),
		"%Y", now.Format("2006"), "%m", now.Format("01"), "%H", now.Format("15"), "%M", now.Format("04"))
	return r.Replace(args[0].String())
}

// specialToken finds the token whose vocabulary text is s, control tokens
// included (Lookup finds only the ones that decode to text).
func specialToken(tok *tokenizer.Tokenizer, s string) (int, bool) {
	if id, ok := tok.Lookup(s); ok {
		return id, true
	}
	for id := range tok.VocabSize() {
		if tok.Token(id) == s {
			return id, true
		}
	}
	return -1, false
}

// EncodePrompt tokenizes a prompt for m: plainly, or with chat as one user
// turn (see EncodeChat).
func (m *Model) EncodePrompt(prompt string, chat bool) (ids, stops []int, err error) {
	tok := m.Tokenizer
	if !chat {
		return tok.Encode(prompt, tok.AddBOS()), nil, nil
	}
	return m.EncodeChat([]Message{{Role: "user", Content: prompt}})
}

// EncodeChat tokenizes a conversation through the model's chat template,
// with the assistant's turn opened: the template's special-token text
// becomes those tokens, and the beginning-of-text token is added only when
// the template did not write it. stops holds the end-of-turn token (and
// end of text) for generation. A template the Jinja engine cannot render
// falls back to the built-in format of its family (DetectChatFormat).
func (m *Model) EncodeChat(msgs []Message) (ids, stops []int, err error) {
	tok := m.Tokenizer
	text, err := m.RenderChat(msgs, true)
	if err != nil {
		f, ferr := DetectChatFormat(m.ChatTemplate)
		if ferr != nil {
			return nil, nil, err
		}
		if text, ferr = f.Format(msgs); ferr != nil {
			return nil, nil, ferr
		}
	}
	bos := tok.AddBOS()
	if b := tok.Token(tok.BOS()); b != "" && strings.HasPrefix(text, b) {
		bos = false
	}
	if f, ferr := DetectChatFormat(m.ChatTemplate); ferr == nil {
		if id, ok := specialToken(tok, f.EndOfTurn()); ok {
			stops = append(stops, id)
		}
	}
	if eos := tok.EOS(); eos >= 0 && !slices.Contains(stops, eos) {
		stops = append(stops, eos)
	}
	return tok.EncodeSpecial(text, bos), stops, nil
}
