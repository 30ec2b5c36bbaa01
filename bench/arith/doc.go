// Package arith is the data side of the arith task: multi-step arithmetic
// word problems ("Hal has 82 toys. He buys 3 bags with 10 toys in each
// bag. ... How many toys does Hal have now?") with worked solutions in the
// GSM8K JSONL format, on which a small Llama-architecture model is trained
// from scratch and then shipped as a GGUF file with its tokenizer embedded.
//
// The task's text comes from a handful of fixed lists (the names, items
// and phrasings of the generator, gen.py next to the data in
// ../shared/data/arith), so the package defines its own tiny SentencePiece
// ("llama") vocabulary, Vocab, laid out as Llama 2's: <unk>, <s>, </s>, the 256 byte pieces <0x00> ..
// <0xFF> (byte fallback, so that any text can be encoded), then a few
// hundred normal pieces:
//
//   - "▁" and every printable ASCII character on its own, digits included;
//   - every word of the task in both of its forms, "▁Hal" (after a space)
//     and "Hal" (at the start of a line), with every prefix of each form,
//     which SentencePiece BPE needs to merge a word letter by letter;
//   - "▁=", "▁+", "▁-", "▁*".
//
// A piece's score is its length in characters, so a longer piece always
// merges first and, between pieces of one length, the leftmost pair does
// (the tie rule of SentencePiece, llama.cpp and model/tokenizer): a word is
// therefore always merged from its first letter to its last and becomes
// one token. No piece holds two digits or a digit after "▁", so a number
// always tokenizes as "▁" and then one token per digit ("▁", "1", "2", "4"
// for " 124"): the model sees every digit as the same token wherever it
// stands. A newline has no piece and becomes the byte piece <0x0A>, as in
// Llama 2.
//
// A problem is shown to the model as Prompt(question) and must be
// continued with Completion(answer) and then the end-of-sequence token
// </s>. Encode tokenizes a problem for training exactly as inference
// tokenizes the prompt (BOS, SentencePiece's dummy space prefix), so that
// the first promptLen tokens of a training sequence are the tokens the
// engine feeds the model for that question, and checks that the
// completion's tokens continue them cleanly. ReadFile reads the problems
// from a .jsonl or gzip-compressed .jsonl.gz file.
package arith
