package certs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/google/renameio/v2"
)

// writeFile writes data to path atomically with exactly perm. Without
// overwrite it links the finished file into place, which fails if path
// exists, so that a file created since WriteBundle looked is not replaced.
func writeFile(path string, data []byte, perm os.FileMode, overwrite bool) error {
	pending, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(perm))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() { _ = pending.Cleanup() }()
	if _, err := pending.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if overwrite {
		if err := pending.CloseAtomicallyReplace(); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	}
	if err := pending.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Link(pending.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &ExistError{Paths: []string{path}}
		}
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// syncDir makes the directory entries of the files just written durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
