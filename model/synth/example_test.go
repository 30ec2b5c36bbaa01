package synth_test

import (
	"bytes"
	"fmt"

	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
	"github.com/entropix-search/entropix-search/model/cpu"
	"github.com/entropix-search/entropix-search/model/kernels"
	"github.com/entropix-search/entropix-search/model/synth"
)

func ExampleGenerate() {
	shape := synth.Shapes["stories15M"]
	m, err := synth.Generate(shape, kernels.Q8_0, 1)
	if err != nil {
		panic(err)
	}
	kv, _ := m.NewCache(16, 16, kvcache.F32)
	r := cpu.NewRunner(m, cpu.NewCache(kv))
	out, err := r.Forward([]model.Row{{Seq: kv.NewSeq(), Token: 1}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %.1fM parameters, head dim %d, %d logits\n", shape.Name, float64(shape.Params())/1e6, shape.HeadDim(), len(out.Logits(0)))
	// Output: stories15M: 15.2M parameters, head dim 48, 32000 logits
}

func ExampleWriteGGUF() {
	var buf bytes.Buffer
	if err := synth.WriteGGUF(&buf, synth.Shapes["stories260K"], kernels.F32, 1, nil); err != nil {
		panic(err)
	}
	fmt.Printf("%s, %.2f MB\n", buf.Bytes()[:4], float64(buf.Len())/1e6)
	// Output: GGUF, 1.05 MB
}
