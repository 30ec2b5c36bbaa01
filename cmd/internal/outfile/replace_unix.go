//go:build !windows

package outfile

import (
	"io"
	"os"
	"syscall"

	"github.com/google/renameio/v2"
)

// replace writes the regular file path (new or existing) through write
// atomically, keeping the mode of a file it replaces.
func replace(path string, write func(io.Writer) error) error {
	t, err := renameio.NewPendingFile(path, renameio.WithPermissions(0o644), renameio.WithExistingPermissions())
	if err != nil {
		return err
	}
	defer t.Cleanup() // removes the temporary file unless it replaced path
	if err := buffered(t, write); err != nil {
		return err
	}
	return t.CloseAtomicallyReplace()
}

// openNonblock opens the special file path for writing without
// blocking: a FIFO nobody reads is refused, not waited on.
func openNonblock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
}
