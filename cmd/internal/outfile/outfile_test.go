package outfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A writer that fails halfway leaves the old file whole and no
	// temporary file behind.
	boom := errors.New("boom")
	err := Write(path, nil, func(w io.Writer) error {
		w.Write(bytes.Repeat([]byte("x"), 1<<20))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("the old file became %d bytes", len(b))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
	// Success replaces it and keeps its mode.
	if err := Write(path, nil, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("replaced file %q, mode %v", b, fi.Mode())
	}
}

func TestWriteFollowsLinksAndDevices(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "real.dot")
	link := filepath.Join(dir, "link.dot")
	os.WriteFile(dst, []byte("old"), 0o644)
	if err := os.Symlink("real.dot", link); err != nil {
		t.Skip("no symlinks:", err)
	}
	if err := Write(link, nil, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is gone: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "new" {
		t.Fatalf("target %q", b)
	}
	// A link to a full device: the write fails, the link and the device stay.
	full := filepath.Join(dir, "full")
	if err := os.Symlink("/dev/full", full); err == nil {
		if _, err := os.Stat("/dev/full"); err == nil {
			err := Write(full, nil, func(w io.Writer) error { _, err := w.Write(make([]byte, 1<<16)); return err })
			if err == nil {
				t.Error("writing to /dev/full succeeded")
			}
			if _, err := os.Lstat(full); err != nil {
				t.Errorf("the link to /dev/full is gone: %v", err)
			}
			if _, err := os.Stat("/dev/full"); err != nil {
				t.Errorf("/dev/full is gone: %v", err)
			}
		}
	}
	// "-" is standard output.
	var out bytes.Buffer
	if err := Write(Stdout, &out, func(w io.Writer) error { _, err := io.WriteString(w, "hi"); return err }); err != nil || out.String() != "hi" {
		t.Fatalf("stdout: %q, %v", out.String(), err)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	for _, ok := range []string{filepath.Join(dir, "new.json"), Stdout, "/dev/null"} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%s): %v", ok, err)
		}
	}
	for _, bad := range []string{filepath.Join(dir, "no", "such", "dir", "t.json"), dir, ""} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%q) passed", bad)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("Check left files: %v", ents)
	}
	// A FIFO nobody reads is refused at once, not waited on.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := mkfifo(fifo); err == nil {
		if err := Check(fifo); err == nil {
			t.Error("Check passed a FIFO without a reader")
		}
	}
}
