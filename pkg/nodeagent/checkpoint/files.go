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
)

// Step names a point inside a durable write, where a test may inject a crash.
type Step string

const (
	// StepTempWritten: the content is in the temporary file, not yet fsynced.
	StepTempWritten Step = "temp-written"
	// StepTempSynced: the temporary file is fsynced, not yet renamed.
	StepTempSynced Step = "temp-synced"
	// StepRenamed: the rename is done, the directory is not yet fsynced.
	StepRenamed Step = "renamed"
	// StepDirSynced: the write is complete and durable.
	StepDirSynced Step = "dir-synced"
	// StepRemoved: a file was unlinked, the directory is not yet fsynced.
	StepRemoved Step = "removed"
)

// ErrSimulatedCrash, returned by a failpoint, makes the store return at once
// without cleaning up, as a killed process would.
var ErrSimulatedCrash = errors.New("simulated crash")

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
	// tempPrefix is how renameio names its temporary files: "." + target name.
	tempPrefix = "."
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

// writeFile replaces path durably: temp file, fsync, rename, fsync of the
// directory. Failpoints fire between the steps.
func (s *Store) writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	pending, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir), renameio.WithStaticPermissions(filePerm))
	if err != nil {
		return fmt.Errorf("creating temporary file for %s: %w", path, err)
	}
	crashed := false
	defer func() {
		if !crashed {
			// After a successful rename Cleanup is a no-op.
			_ = pending.Cleanup()
		}
	}()
	hit := func(step Step) error {
		err := s.hit(step, path)
		crashed = errors.Is(err, ErrSimulatedCrash)
		return err
	}
	if _, err := pending.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := hit(StepTempWritten); err != nil {
		return err
	}
	if err := pending.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err := hit(StepTempSynced); err != nil {
		return err
	}
	if err := pending.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	if err := hit(StepRenamed); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return hit(StepDirSynced)
}

// removeFile unlinks path durably; a missing file is not an error.
func (s *Store) removeFile(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if err := s.hit(StepRemoved, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func (s *Store) hit(step Step, path string) error {
	if s.failpoint == nil {
		return nil
	}
	return s.failpoint(step, path)
}

// syncDir fsyncs a directory so that renames and unlinks in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening directory %s for fsync: %w", dir, err)
	}
	syncErr := d.Sync()
	closeErr := d.Close()
	if syncErr != nil {
		return fmt.Errorf("fsync of directory %s: %w", dir, syncErr)
	}
	if closeErr != nil {
		return fmt.Errorf("closing directory %s: %w", dir, closeErr)
	}
	return nil
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
func (s *Store) readEnvelope(path, kind string, v any, extraCheck func() error) error {
	err := inspectFile(path, kind, v, extraCheck)
	if errors.Is(err, ErrNotFound) {
		return ErrNotFound
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
	if err := syncDir(filepath.Dir(path)); err != nil {
		return target, err
	}
	if err := syncDir(corruptDir); err != nil {
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
// store writes there, and none of its own file names start with a dot.
func removeStaleTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	removed := false
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing stale temporary file: %w", err)
		}
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}
