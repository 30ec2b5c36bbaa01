//go:build !windows

package policy

import (
	"fmt"

	"github.com/google/renameio/v2"
)

// saveAtomic writes data to path atomically (github.com/google/renameio),
// keeping the mode of a file it replaces.
func saveAtomic(path string, data []byte) error {
	if err := renameio.WriteFile(path, data, 0o644, renameio.WithExistingPermissions()); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}
