package engine

// The engine's tests run real models on the CPU backend, which a program
// registers by importing its package; the scripted backend
// (scripted_test.go) runs none.
import _ "github.com/entropix-search/entropix-search/model/cpu"
