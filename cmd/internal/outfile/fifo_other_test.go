//go:build !unix

package outfile

import "errors"

// mkfifo fails: this platform has no FIFOs.
func mkfifo(path string) error { return errors.ErrUnsupported }
