package certs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/google/renameio/v2"

	"github.com/nodeguard/nodeguard/pkg/durable"
)

// writeFile writes data to path atomically with exactly perm. With
// overwrite it replaces path (pkg/durable). Without, it links the finished
// file into place, which fails if path exists, so that a file created since
// WriteBundle looked is not replaced; the caller fsyncs the directory once
// every file is linked.
func writeFile(path string, data []byte, perm os.FileMode, overwrite bool) error {
	if overwrite {
		return durable.WriteFile(path, data, nil, renameio.WithStaticPermissions(perm))
	}
	pending, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(perm))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() { _ = pending.Cleanup() }()
	if _, err := pending.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
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
