package images

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenArchiveRefuses: what `make push` reads back from the output
// directory is refused with an error that says why when it is not an
// archive Build wrote, and nothing is extracted outside the directory.
func TestOpenArchiveRefuses(t *testing.T) {
	tarOf := func(t *testing.T, entries map[string]byte) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "x.oci.tar")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		tw := tar.NewWriter(f)
		for name, typ := range entries {
			hdr := &tar.Header{Name: name, Typeflag: typ, Mode: 0o644, Linkname: "/etc/passwd"}
			if err := tw.WriteHeader(hdr); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	truncated := filepath.Join(t.TempDir(), "truncated.oci.tar")
	if err := os.WriteFile(truncated, []byte("not a tar at all, and far too short to be one"), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"an entry leaving the directory", tarOf(t, map[string]byte{"../escaped": tar.TypeReg}), "leaves the layout"},
		{"a symlink", tarOf(t, map[string]byte{"index.json": tar.TypeSymlink}), "only files and directories"},
		{"no image layout", tarOf(t, map[string]byte{"README": tar.TypeReg}), "not an OCI image layout"},
		{"not a tar", truncated, "extracting"},
		{"missing", filepath.Join(parent, "absent.oci.tar"), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(parent, "out", strings.ReplaceAll(tc.name, " ", "-"))
			_, err := OpenArchive(tc.path, dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("OpenArchive: %v, want an error saying %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(parent, "out", "escaped")); err == nil {
				t.Fatal("an entry was written outside the directory")
			}
		})
	}
}
