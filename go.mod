module github.com/entropix-search/entropix-search

go 1.26.0

require (
	github.com/dlclark/regexp2 v1.11.5 // indirect
	github.com/emirpasic/gods/v2 v2.0.0-alpha // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
