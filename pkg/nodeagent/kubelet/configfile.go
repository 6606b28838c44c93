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

	"github.com/nodeguard/nodeguard/pkg/durable"
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

// Write makes the file r, atomically and durably (pkg/durable): a
// kubelet restarting at any moment reads the old file or the new one.
func (f ConfigFile) Write(r Rendered) error {
	if r.Absent {
		if err := durable.Remove(f.Path, nil); err != nil {
			return fmt.Errorf("removing kubelet config: %w", err)
		}
		return nil
	}
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	// The kubelet runs as root and reads this file; it holds no secrets
	// (node-local paths at most), so keep the usual 0644 of a new file and
	// whatever mode an existing one has.
	// The temporary file lives next to the target; its name
	// (".<name><digits>") does not end in ".conf", so a kubelet listing
	// --config-dir never reads it. A kill before the rename leaves it
	// behind: RemoveStaleTemps, at start-up.
	if err := durable.WriteFile(f.Path, r.Data, nil, renameio.WithPermissions(0o644), renameio.WithExistingPermissions()); err != nil {
		return fmt.Errorf("writing kubelet config: %w", err)
	}
	return nil
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
