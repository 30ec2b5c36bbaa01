//go:build !unix

package mmap

import (
	"errors"
	"os"
)

func mapFile(*os.File, int) ([]byte, func([]byte) error, error) {
	return nil, nil, errors.New("mmap not supported")
}

func release([]byte) {}
