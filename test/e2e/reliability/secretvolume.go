package reliability

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// dataLink is the symlink a Secret volume's visible files point through.
const dataLink = "..data"

// WriteSecretVolume replaces the files in dir as the kubelet updates a
// Secret volume: every file is written into a new timestamped directory,
// a new symlink to it is renamed over ..data in one step, each visible
// name is (once) a symlink through ..data, and the previous timestamped
// directory is removed. Readers see the old set or the new set, never a
// mix, but the paths they watch never change: only what ..data points at.
func WriteSecretVolume(dir string, files map[string][]byte) error {
	generation := "..2026_11_29_" + time.Now().UTC().Format("15_04_05.000000000")
	if err := os.MkdirAll(filepath.Join(dir, generation), 0o700); err != nil {
		return fmt.Errorf("secret volume: %w", err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, generation, name), content, 0o600); err != nil {
			return fmt.Errorf("secret volume: %w", err)
		}
	}
	previous, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("secret volume: %w", err)
	}
	tmp := filepath.Join(dir, dataLink+"_tmp")
	if err := os.Symlink(generation, tmp); err != nil {
		return fmt.Errorf("secret volume: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return fmt.Errorf("secret volume: swapping %s: %w", dataLink, err)
	}
	for name := range files {
		visible := filepath.Join(dir, name)
		if _, err := os.Lstat(visible); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join(dataLink, name), visible); err != nil {
				return fmt.Errorf("secret volume: %w", err)
			}
		}
	}
	if previous != "" && previous != generation {
		if err := os.RemoveAll(filepath.Join(dir, previous)); err != nil {
			return fmt.Errorf("secret volume: removing %s: %w", previous, err)
		}
	}
	return nil
}

// RewriteInPlace truncates and rewrites each file in dir, as an operator
// with a text editor or `cp` would: a reader can see a file empty, half
// written, or a new certificate beside the old key.
func RewriteInPlace(dir string, files map[string][]byte) error {
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			return fmt.Errorf("rewriting %s: %w", name, err)
		}
	}
	return nil
}
