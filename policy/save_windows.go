package policy

import (
	"bytes"
	"fmt"

	"github.com/natefinch/atomic"
)

// saveAtomic writes data to path atomically (github.com/natefinch/atomic:
// a temporary file in the same folder, then MoveFileEx over path),
// keeping the mode of a file it replaces.
func saveAtomic(path string, data []byte) error {
	if err := atomic.WriteFile(path, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}
