package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/nodeguard/nodeguard/pkg/durable"
)

var (
	// ErrNotFound: the file does not exist.
	ErrNotFound = errors.New("not found")
	// ErrCorrupt: the file failed its checks and was moved aside.
	ErrCorrupt = errors.New("corrupt")
)

const (
	envelopeFormat = "nodeguard.dev/agent-state/v1"
	// maxFileBytes bounds what is read back: a ConfigMap is at most 1 MiB, and
	// JSON string escaping can at most double most of it.
	maxFileBytes   = 4 << 20
	filePerm       = 0o600
	dirPerm        = 0o700
	corruptDirName = "corrupt"
	// maxCorruptFiles keeps a corrupting disk from filling the state dir.
	maxCorruptFiles = 32
)

// envelope is the on-disk wrapping of every file.
type envelope struct {
	Format string          `json:"format"`
	Kind   string          `json:"kind"`
	SHA256 string          `json:"sha256"`
	Body   json.RawMessage `json:"body"`
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func encodeEnvelope(kind string, body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", kind, err)
	}
	data, err := json.Marshal(envelope{Format: envelopeFormat, Kind: kind, SHA256: checksum(raw), Body: raw})
	if err != nil {
		return nil, fmt.Errorf("encoding %s envelope: %w", kind, err)
	}
	return append(data, '\n'), nil
}

// decodeEnvelope checks the envelope and decodes its body into v. Any error
// means the file cannot be trusted.
func decodeEnvelope(data []byte, kind string, v any) error {
	var env envelope
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&env); err != nil {
		return fmt.Errorf("decoding envelope: %w", err)
	}
	if decoder.More() {
		return errors.New("trailing data after the envelope")
	}
	switch {
	case env.Format != envelopeFormat:
		return fmt.Errorf("format %q, want %q", env.Format, envelopeFormat)
	case env.Kind != kind:
		return fmt.Errorf("holds a %q, want a %q", env.Kind, kind)
	case checksum(env.Body) != env.SHA256:
		return errors.New("checksum mismatch")
	}
	body := json.NewDecoder(bytes.NewReader(env.Body))
	body.DisallowUnknownFields()
	if err := body.Decode(v); err != nil {
		return fmt.Errorf("decoding body: %w", err)
	}
	return nil
}

// writeFile replaces path durably; the failpoint fires between the steps.
func (s *Store) writeFile(path string, data []byte) error {
	return durable.WriteFile(path, data, s.failpoint, renameio.WithStaticPermissions(filePerm))
}

// removeFile unlinks path durably; a missing file is not an error.
func (s *Store) removeFile(path string) error {
	return durable.Remove(path, s.failpoint)
}

// readFile reads path, refusing oversized files and anything but a regular
// file (a symlink planted in the state dir is not followed).
func readFile(path string) ([]byte, error) {
	info, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, info.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxFileBytes)
	}
	return data, nil
}

// readEnvelope reads and checks one file. A file that fails its checks is
// moved aside and reported as ErrCorrupt, with the reason.
func (s *Store) readEnvelope(path, kind string, v any, check func() error) error {
	data, err := readFile(path)
	if errors.Is(err, ErrNotFound) {
		return ErrNotFound
	}
	if err == nil {
		err = decodeEnvelope(data, kind, v)
	}
	if err == nil {
		err = check()
	}
	if err == nil {
		return nil
	}
	moved, qErr := s.quarantine(path)
	if qErr != nil {
		return fmt.Errorf("%w: %s: %v; and moving it aside failed: %w", ErrCorrupt, path, err, qErr)
	}
	return fmt.Errorf("%w: %s: %v (moved to %s)", ErrCorrupt, path, err, moved)
}

// quarantine moves a bad file into corrupt/, keeping it for a post-mortem.
func (s *Store) quarantine(path string) (string, error) {
	corruptDir := filepath.Join(s.dir, corruptDirName)
	target := filepath.Join(corruptDir, filepath.Base(path)+"."+strconv.FormatInt(s.now().UnixNano(), 10))
	if err := os.Rename(path, target); err != nil {
		return "", fmt.Errorf("moving %s aside: %w", path, err)
	}
	if err := durable.SyncDir(filepath.Dir(path)); err != nil {
		return target, err
	}
	if err := durable.SyncDir(corruptDir); err != nil {
		return target, err
	}
	return target, s.pruneCorrupt()
}

func (s *Store) pruneCorrupt() error {
	corruptDir := filepath.Join(s.dir, corruptDirName)
	entries, err := os.ReadDir(corruptDir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", corruptDir, err)
	}
	if len(entries) <= maxCorruptFiles {
		return nil
	}
	// Suffixes are nanosecond timestamps of equal width for decades, but
	// sort by modification time to be independent of names.
	type aged struct {
		name string
		mod  int64
	}
	var files []aged
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, aged{e.Name(), info.ModTime().UnixNano()})
	}
	for len(files) > maxCorruptFiles {
		oldest := 0
		for i := range files {
			if files[i].mod < files[oldest].mod {
				oldest = i
			}
		}
		if err := os.Remove(filepath.Join(corruptDir, files[oldest].name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pruning %s: %w", corruptDir, err)
		}
		files = append(files[:oldest], files[oldest+1:]...)
	}
	return nil
}

// removeStaleTemps deletes temporary files a crash left in dir. Only this
// store writes there, and none of its own file names start with
// durable.TempPrefix.
func removeStaleTemps(dir string) error {
	_, err := durable.RemoveTemps(dir, isTemp)
	return err
}

// isTemp reports whether a name in the state directory is a temporary file.
func isTemp(name string) bool { return strings.HasPrefix(name, durable.TempPrefix) }
