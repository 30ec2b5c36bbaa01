package outfile

import (
	"errors"
	"io"
	"os"

	"github.com/natefinch/atomic"
)

// replace writes the regular file path (new or existing) through write
// atomically (github.com/natefinch/atomic: a temporary file in the same
// folder, synced, then MoveFileEx over path), keeping the mode of a file
// it replaces.
func replace(path string, write func(io.Writer) error) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := buffered(pw, write)
		pw.CloseWithError(err)
		done <- err
	}()
	err := atomic.WriteFile(path, pr)
	pr.CloseWithError(io.ErrClosedPipe) // a writer still writing stops
	if werr := <-done; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		return werr // the writer's own error, rather than the copy's
	}
	return err
}

// openNonblock opens the special file path (a device) for writing.
func openNonblock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY, 0)
}
