package ggml

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// Logger receives ggml's log, one call a line, without the newline.
type Logger func(level LogLevel, line string)

var logState struct {
	sync.Mutex
	fn    Logger
	level LogLevel // of the line being assembled
	buf   strings.Builder
}

// SetLogger routes ggml's log lines to fn (nil: the default, warnings and
// errors to standard error).
func SetLogger(fn Logger) {
	logState.Lock()
	logState.fn = fn
	logState.Unlock()
}

func defaultLogger(level LogLevel, line string) {
	if level >= LogWarn {
		fmt.Fprintln(os.Stderr, "ggml:", line)
	}
}

// logText takes one piece of ggml's log: ggml sends a line in one piece or
// several (LogCont continues the last level), each ending it with a
// newline.
func logText(level LogLevel, text string) {
	s := &logState
	s.Lock()
	defer s.Unlock()
	if level != LogCont {
		s.level = level
	}
	s.buf.WriteString(text)
	for {
		all := s.buf.String()
		i := strings.IndexByte(all, '\n')
		if i < 0 {
			return
		}
		line, rest := all[:i], all[i+1:]
		fn := s.fn
		if fn == nil {
			fn = defaultLogger
		}
		fn(s.level, line)
		s.buf.Reset()
		s.buf.WriteString(rest)
	}
}

// goString copies the NUL-terminated C string at p.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// Logf sends a line of the program's own through the same logger as
// ggml's.
func Logf(level LogLevel, format string, args ...any) {
	s := &logState
	s.Lock()
	fn := s.fn
	s.Unlock()
	if fn == nil {
		fn = defaultLogger
	}
	fn(level, fmt.Sprintf(format, args...))
}
