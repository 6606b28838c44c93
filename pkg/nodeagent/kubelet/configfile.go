package kubelet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Mode says which file the agent owns.
type Mode string

const (
	// ModeConfig: the agent writes the kubelet's --config file.
	ModeConfig Mode = "config"
	// ModeDropIn: the agent writes one drop-in in the kubelet's --config-dir.
	ModeDropIn Mode = "drop-in"
)

// Rendered is what the kubelet configuration file should be.
type Rendered struct {
	// Absent means the file should not exist (ModeDropIn, local config).
	Absent bool
	Data   []byte
}

// SHA256 is the checksum recorded for a rendered file; empty when Absent.
func (r Rendered) SHA256() string {
	if r.Absent {
		return ""
	}
	return Checksum(r.Data)
}

// Checksum is the hex SHA-256 of data.
func Checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ConfigFile is the kubelet configuration file the agent owns.
type ConfigFile struct {
	Path string
}

// Matches reports whether the file on disk is already r.
func (f ConfigFile) Matches(r Rendered) (bool, error) {
	data, err := os.ReadFile(f.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r.Absent, nil
	case err != nil:
		return false, fmt.Errorf("reading kubelet config %s: %w", f.Path, err)
	}
	return !r.Absent && bytes.Equal(data, r.Data), nil
}

// Write makes the file r, atomically and durably: a kubelet restarting at any
// moment reads the old file or the new one.
func (f ConfigFile) Write(r Rendered) error {
	dir := filepath.Dir(f.Path)
	if r.Absent {
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing kubelet config %s: %w", f.Path, err)
		}
		return syncDir(dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	// The kubelet runs as root and reads this file; it holds no secrets
	// (node-local paths at most), so keep the usual 0644 of a new file and
	// whatever mode an existing one has.
	// The temporary file lives next to the target, so the rename never
	// crosses file systems; its name (".<name><digits>") does not end in
	// ".conf", so a kubelet listing --config-dir never reads it. A kill
	// before the rename leaves it behind: RemoveStaleTemps, at start-up.
	if err := renameio.WriteFile(f.Path, r.Data, 0o644, renameio.WithTempDir(dir)); err != nil {
		return fmt.Errorf("writing kubelet config %s: %w", f.Path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s for fsync: %w", dir, err)
	}
	syncErr := d.Sync()
	closeErr := d.Close()
	if syncErr != nil {
		return fmt.Errorf("fsync of %s: %w", dir, syncErr)
	}
	return closeErr
}

// Current returns the file as it is, nil when it does not exist.
func (f ConfigFile) Current() ([]byte, error) {
	data, err := os.ReadFile(f.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading kubelet config %s: %w", f.Path, err)
	}
	return data, nil
}
