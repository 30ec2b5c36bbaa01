package model

import (
	"errors"
	"fmt"
	"strings"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user" or "assistant"
	Content string
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

// EncodePrompt tokenizes a prompt for m: plainly, or with chat through the
// model's chat template as one user turn, in which case the end-of-turn
// token comes back as an extra stop token for generation.
func (m *Model) EncodePrompt(prompt string, chat bool) (ids, stops []int, err error) {
	tok := m.Tokenizer
	if !chat {
		return tok.Encode(prompt, tok.AddBOS()), nil, nil
	}
	f, err := DetectChatFormat(m.ChatTemplate)
	if err != nil {
		return nil, nil, err
	}
	text, err := f.Format([]Message{{Role: "user", Content: prompt}})
	if err != nil {
		return nil, nil, err
	}
	if id, ok := tok.Lookup(f.EndOfTurn()); ok {
		stops = append(stops, id)
	}
	return tok.EncodeSpecial(text, tok.AddBOS()), stops, nil
}
