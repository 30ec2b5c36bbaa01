// Package tokenizer turns text into the token ids of Llama-family models
// and back, exactly as the reference implementations do (llama2.c's run.c
// and llama.cpp's llama-vocab.cpp).
//
// Three vocabulary formats are read; all end up as a Vocab given to New.
//
// llama2.c tokenizer.bin (LoadLlama2C, ParseLlama2C): an int32
// max_token_length, then per token a float32 score, an int32 length and the
// bytes. The count is not stored; it comes from the model header. Spaces
// are plain spaces, byte pieces are spelled <0x00>..<0xFF>, and ids 0, 1, 2
// are <unk>, BOS and EOS.
//
// GGUF SentencePiece vocabulary (tokenizer.ggml.model = "llama": Llama 1
// and 2, Mistral, TinyLlama): pieces with scores, "▁" (U+2581) standing for
// a space, and token types marking byte pieces (6) and control tokens (3).
// Both SentencePiece forms encode alike: a space is put before the text
// (the "dummy prefix", when AddSpacePrefix), every codepoint becomes its
// piece, or its UTF-8 bytes as <0xNN> pieces when the vocabulary has none
// ("byte fallback"), and then the adjacent pair whose concatenation is the
// piece with the highest score is merged, leftmost first on ties, until no
// adjacent pair forms a piece.
//
// GGUF byte-level BPE vocabulary (tokenizer.ggml.model = "gpt2": Llama 3,
// Qwen2, SmolLM): the text is first cut into words by the pre-tokenizer
// named in tokenizer.ggml.pre (a regular expression such as Llama 3's
// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
// implemented here by hand, without backtracking). Each word starts as one
// symbol per byte, written in GPT-2's byte-to-unicode alphabet (a space is
// "Ġ"), and the adjacent pair with the lowest-ranked entry in
// tokenizer.ggml.merges is merged until none is left. Llama 3 takes a word
// that is itself a token whole ("ignore_merges").
//
// Both merge loops keep the candidate pairs in a heap over a linked list of
// symbols, so encoding is O(n log n) in the length of the text, not the
// O(n²) of llama2.c's rescanning loop; the pieces are found in a map built
// once by New. When no SentencePiece piece has a space after another
// character (true of Llama 2's vocabulary), no merge can cross the start of
// a word, and each word is merged with its own small heap; the result is
// the same.
//
// User-defined tokens spelled in the text are always encoded as those
// tokens; control tokens ("<|begin_of_text|>", "<s>") only by
// EncodeSpecial, so that user text cannot inject them. As in llama.cpp, a
// SentencePiece encoding puts the space prefix before the text that follows
// such a token too.
//
// Decoding concatenates the bytes of the tokens: "▁" becomes a space, a
// byte token its byte, a byte-level token its bytes; control tokens give
// nothing. Decode removes the space prefixes that Encode added (one leading
// space at the start and after a control or user-defined token), so that
// Decode(Encode(s)) == s for every string, spaces at its start included,
// whenever the vocabulary has byte tokens. A Decoder does the same one
// token at a time, starting after a given token (the last of the prompt),
// and holds back incomplete UTF-8 sequences, for streaming generated text.
//
// Deviations from llama.cpp, all confined to unusual input: the character
// U+2581 in the text is encoded as itself (byte fallback), not as a space,
// so that it round-trips; decoding does not apply llama.cpp's
// clean_up_tokenization_spaces; invalid UTF-8 is encoded byte by byte.
package tokenizer
