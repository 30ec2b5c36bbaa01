package arith_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/entropix-search/entropix-search/bench"
	"github.com/entropix-search/entropix-search/bench/arith"
)

func Example() {
	tok, err := arith.Tokenizer()
	if err != nil {
		log.Fatal(err)
	}
	p := bench.GSM8KProblem{
		Question: "Hal has 82 toys. Then Hal doubles the toys. How many toys does Hal have now?",
		Answer:   "Hal has 2 * 82 = 164 toys.\n#### 164",
	}
	fmt.Printf("%q\n", arith.Prompt(p.Question)+arith.Completion(p.Answer))
	ids, promptLen, err := arith.Encode(tok, p)
	if err != nil {
		log.Fatal(err)
	}
	show := func(ids []int32) string {
		var s []string
		for _, id := range ids {
			s = append(s, tok.Token(int(id)))
		}
		return strings.Join(s, " ")
	}
	fmt.Println("prompt:    ", show(ids[:promptLen]))
	fmt.Println("completion:", show(ids[promptLen:]))
	// Output:
	// "Question: Hal has 82 toys. Then Hal doubles the toys. How many toys does Hal have now?\nAnswer: Hal has 2 * 82 = 164 toys.\n#### 164"
	// prompt:     <s> ▁Question : ▁Hal ▁has ▁ 8 2 ▁toys . ▁Then ▁Hal ▁doubles ▁the ▁toys . ▁How ▁many ▁toys ▁does ▁Hal ▁have ▁now ? <0x0A> Answer :
	// completion: ▁Hal ▁has ▁ 2 ▁* ▁ 8 2 ▁= ▁ 1 6 4 ▁toys . <0x0A> #### ▁ 1 6 4 </s>
}
