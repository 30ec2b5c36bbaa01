package arith

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/entropix-search/entropix-search/bench"
)

// MaxLine bounds the length of one line of a problem file, in bytes after
// decompression; a problem of the task is a few hundred bytes.
const MaxLine = 64 << 10

// ReadFile reads the problems of a GSM8K-style JSONL file (a question and
// an answer ending in "#### N" a line, as bench.ReadGSM8K parses them),
// stopping after limit problems when limit > 0. The file may be
// gzip-compressed (.jsonl.gz): that is recognized by its magic bytes, and a
// file named .gz that is not gzip is an error. Every error names the file
// and, once reading has begun, the line; a line longer than MaxLine and a
// file with no problem are errors too.
func ReadFile(path string, limit int) ([]bench.GSM8KProblem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("arith: %w", err)
	}
	defer f.Close()

	br := bufio.NewReader(f)
	var r io.Reader = br
	magic, err := br.Peek(2)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("arith: %s: %w", path, err)
	}
	switch {
	case bytes.Equal(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("arith: %s: gzip: %w", path, err)
		}
		defer zr.Close()
		r = zr
	case strings.HasSuffix(path, ".gz"):
		return nil, fmt.Errorf("arith: %s: named .gz but not gzip-compressed", path)
	}

	ps, err := bench.ReadGSM8K(newLineReader(r, MaxLine), limit)
	if err != nil {
		return nil, fmt.Errorf("arith: %s: %w", path, err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("arith: %s: no problems in the file", path)
	}
	return ps, nil
}

// errLongLine is the error of a line longer than MaxLine.
var errLongLine = errors.New("too long")

// lineReader passes the lines of a reader through whole, counting them, so
// that an error names the line it happened on: a line longer than max
// bytes (before bench.ReadGSM8K's own, larger, bound), or a read error
// such as a corrupt gzip stream. The part of a line read before such an
// error is dropped, so that it is never parsed as a line of its own.
type lineReader struct {
	br      *bufio.Reader // of size max+1: a line and its newline fit
	max     int
	line    int    // lines read
	pending []byte // what is left of the current line
	err     error  // sticky
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, max+1), max: max}
}

func (l *lineReader) Read(p []byte) (int, error) {
	for len(l.pending) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		line, err := l.br.ReadSlice('\n')
		switch {
		case err == nil:
			l.line++
		case err == io.EOF: // a last line without a newline, if any
			l.err = io.EOF
		case errors.Is(err, bufio.ErrBufferFull):
			l.err = fmt.Errorf("line %d: %w (more than %d bytes)", l.line+1, errLongLine, l.max)
			line = nil
		default:
			l.err = fmt.Errorf("line %d: %w", l.line+1, err)
			line = nil
		}
		l.pending = line
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	return n, nil
}
