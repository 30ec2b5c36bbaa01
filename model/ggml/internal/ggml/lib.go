package ggml

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
)

// libExt is the shared libraries' file extension.
func libExt() string {
	if runtime.GOOS == "darwin" {
		return ".dylib"
	}
	return ".so"
}

// registryLib finds the backend registry library in dir: libggml.so (a
// build of ggml), or a prebuilt package's libggml.<variant>.so.
func registryLib(dir string) (string, error) {
	ext := libExt()
	if p := filepath.Join(dir, "libggml"+ext); fileExists(p) {
		return p, nil
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "libggml.*"+ext))
	slices.Sort(matches)
	if len(matches) == 0 {
		return "", fmt.Errorf("ggml: %s has libggml-base%s but no backend registry library (libggml%s or libggml.*%s)", dir, ext, ext, ext)
	}
	return matches[0], nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
