// Package outfile writes the command-line tools' output files so that
// nothing the user had is lost: a regular file is replaced atomically (a
// temporary file in the same folder, synced, then renamed over it, with
// github.com/google/renameio; on Windows github.com/natefinch/atomic), so a failure — a full disk, a killed
// process, a writer error — leaves the old file whole and removes only the
// temporary file; a path that names something else (a device such as
// /dev/stdout, a FIFO) is written in place and never removed; a symbolic
// link is followed, so the link stays and its target is replaced; "-" is
// standard output.
//
// Check tells before any work is done whether a path can be written, so a
// run does not spend its time and then lose its result.
package outfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Stdout is the path that names standard output.
const Stdout = "-"

// target resolves path: symbolic links followed (a dangling link names
// the file it points to), and whether the result exists as something
// other than a regular file.
func target(path string) (real string, special bool, err error) {
	real = path
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		dst, err := os.Readlink(path)
		if err != nil {
			return "", false, err
		}
		if !filepath.IsAbs(dst) {
			dst = filepath.Join(filepath.Dir(path), dst)
		}
		if r, err := filepath.EvalSymlinks(dst); err == nil {
			dst = r
		}
		real = dst
	}
	fi, err := os.Stat(real)
	switch {
	case err == nil:
		return real, !fi.Mode().IsRegular(), nil
	case errors.Is(err, fs.ErrNotExist):
		return real, false, nil
	}
	return "", false, err
}

// Check reports whether path can be written: its folder exists and takes
// a new file, or it names a writable device. It creates nothing that
// stays.
func Check(path string) error {
	if path == Stdout {
		return nil
	}
	if path == "" {
		return errors.New("empty output path")
	}
	real, special, err := target(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if special {
		f, err := openNonblock(real)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return f.Close()
	}
	if fi, err := os.Stat(real); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: is a folder", path)
	}
	dir := filepath.Dir(real)
	f, err := os.CreateTemp(dir, "."+filepath.Base(real)+".check*")
	if err != nil {
		return fmt.Errorf("%s: cannot write in %s: %w", path, dir, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// Write writes path through write, atomically when path is a regular file
// (or does not exist yet). A new file gets mode 0644 (less the umask); a
// replaced one keeps its mode. stdout receives the output when path is
// "-".
func Write(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == Stdout {
		return buffered(stdout, write)
	}
	real, special, err := target(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if special {
		f, err := os.OpenFile(real, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := errors.Join(buffered(f, write), f.Close()); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	}
	if err := replace(real, write); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// buffered runs write through a buffer on w and flushes it.
func buffered(w io.Writer, write func(io.Writer) error) error {
	bw := bufio.NewWriter(w)
	return errors.Join(write(bw), bw.Flush())
}
