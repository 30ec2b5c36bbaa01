package bench

// The measurements and the scorer run the CPU backend (model.NewBackend("cpu", ...)).
import _ "github.com/entropix-search/entropix-search/model/cpu"
