module github.com/entropix-search/entropix-search/model/kernels/asmgen

go 1.26.0

require github.com/mmcloughlin/avo v0.6.0

require (
	golang.org/x/mod v0.35.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/tools v0.44.0 // indirect
)
