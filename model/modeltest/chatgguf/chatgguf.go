// Package chatgguf gives tests a model that can chat: a copy of the
// bundled stories260K GGUF with a chat template of their choice.
package chatgguf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/entropix-search/entropix-search/model/gguf"
	"github.com/entropix-search/entropix-search/model/modeltest"
)

// RoleColon is a template of "role: content" lines, then "assistant:".
const RoleColon = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"

// ChatML is the ChatML template (a family model.DetectChatFormat knows).
const ChatML = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

// Write writes the bundled stories260K GGUF with template as its
// tokenizer.chat_template into a temporary directory and returns the path.
func Write(tb testing.TB, template string) string {
	tb.Helper()
	f, err := gguf.Open(modeltest.Stories260KGGUFPath(tb))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	kv := append(append([]gguf.KV(nil), f.KV...), gguf.KV{Key: "tokenizer.chat_template", Value: gguf.String(template)})
	var ts []gguf.WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: bytes.Clone(f.TensorData(ti))})
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kv, ts); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "chat.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}
