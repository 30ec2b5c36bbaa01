package tokenizer_test

import (
	"fmt"
	"log"

	"github.com/entropix-search/entropix-search/model/tokenizer"
)

// A toy SentencePiece vocabulary in GGUF form: "▁" is a space, byte
// pieces <0x00>..<0xFF> catch characters without a piece, and higher
// scores merge first.
func Example() {
	v := tokenizer.Vocab{Model: "llama", BOS: 1, EOS: 2, UNK: 0, PAD: -1, AddBOS: true, AddSpacePrefix: true}
	add := func(text string, score float32, typ int32) {
		v.Tokens = append(v.Tokens, text)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	add("<unk>", 0, tokenizer.TypeUnknown)
	add("<s>", 0, tokenizer.TypeControl)
	add("</s>", 0, tokenizer.TypeControl)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), 0, tokenizer.TypeByte) // ids 3..258
	}
	for i, p := range []string{"▁", "h", "i", "!", "▁h", "▁hi"} { // ids 259..264
		add(p, -float32(i), tokenizer.TypeNormal)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		log.Fatal(err)
	}

	ids := tok.Encode("hi hi!", tok.AddBOS())
	fmt.Println(ids)
	fmt.Printf("%q\n", tok.Decode(ids))

	// "é" has no piece: its two UTF-8 bytes become <0xC3> <0xA9>. A
	// Decoder streams text and holds back half a character.
	ids = tok.Encode("hé", false)
	fmt.Println(ids)
	d := tok.NewDecoder(-1)
	var parts []string
	for _, id := range ids {
		parts = append(parts, d.Next(id))
	}
	fmt.Printf("%q\n", parts)
	// Output:
	// [1 264 264 262]
	// "hi hi!"
	// [263 198 172]
	// ["h" "" "é"]
}

// Loading the tokenizer of a llama2.c checkpoint; the vocabulary size comes
// from the checkpoint's header.
func ExampleLoadLlama2C() {
	tok, err := tokenizer.LoadLlama2C("stories260K/tok512.bin", 512)
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("Once upon a time", true)
	fmt.Println(ids)             // [1 403 407 261 378]
	fmt.Println(tok.Decode(ids)) // Once upon a time
}
