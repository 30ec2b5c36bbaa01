package engine

// decoder is one decoding mode: one type per mode, each holding its own
// state next to the search it runs in and answering every choice that
// differs between modes. Adding a mode is a Mode constant with its name
// (options.go), a decoder type and its line in decoders.
type decoder interface {
	// budgetDefaults fills the zero fields of the search's budget with
	// the mode's defaults (Budget.MaxWidth, Budget.MaxRows).
	budgetDefaults(b *Budget)
	// attentionLayers are the layers whose attention the mode's policy
	// reads, of a model of n layers (nil: none, and the forward pass
	// keeps no attention for the search).
	attentionLayers(n int) []int
	// noiseFloor is the probability below which the step's row
	// measurement leaves tokens out of the entropy (0: none; see
	// policy.Config.NoiseFloor).
	noiseFloor() float64
	// initRoot sets up the mode's policy state on the root branch.
	initRoot(root *branch) error
	// mayBackspace reports whether the policy may hand Backspace to the
	// engine (the engine then keeps the logits rows a backspace needs).
	mayBackspace() bool
	// rank orders the live branches for pruning (higher is better).
	rank(br *branch) float64
	// defaultAnswer names the answer reader of Settings.Answer the mode
	// uses when the settings name none (Settings.AnswerFunc; asked of a
	// decoder bound to no search).
	defaultAnswer() string
	// advance applies the mode's decisions to the logits of the last
	// forward pass.
	advance() error
	// finalize commits the result when the search ends (a multi-branch
	// mode chooses among its branches; single-path modes have committed
	// as they went).
	finalize()
}

// decoders registers every mode's decoder, by Mode.
var decoders = [...]func(s *search) decoder{
	Greedy:          func(s *search) decoder { return &greedy{singlePath{s}} },
	Sample:          func(s *search) decoder { return &sampling{singlePath{s}} },
	Entropix:        func(s *search) decoder { return &entropix{singlePath{s}} },
	Beam:            func(s *search) decoder { return &beamSearch{search: s} },
	CoTDecoding:     func(s *search) decoder { return &cotDecoding{search: s} },
	BeamAdaptive:    func(s *search) decoder { return newAdaptive(s) },
	SelfConsistency: func(s *search) decoder { return &selfConsistency{samples{search: s}} },
	BestOfN:         func(s *search) decoder { return &bestOf{samples{search: s}} },
}

// Every named mode has a decoder, and every decoder a name.
var _ = [1]struct{}{}[len(decoders)-len(modeNames)]

// newDecoder returns the decoder of s's mode (checked by Options.resolve).
func newDecoder(s *search) decoder { return decoders[s.opts.Mode](s) }
