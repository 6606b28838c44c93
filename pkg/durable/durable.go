package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
)

// Step names a point inside a durable write or removal, where a test may
// inject a crash.
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

// Failpoint, when not nil, is called at each Step of an operation on path;
// an error stops the operation there. Tests only.
type Failpoint func(step Step, path string) error

// ErrSimulatedCrash, returned by a Failpoint, makes WriteFile return at once
// without removing its temporary file, as a killed process would.
var ErrSimulatedCrash = errors.New("simulated crash")

// TempPrefix starts the name of every temporary file WriteFile makes:
// renameio names one "." + the target's name + decimal digits.
const TempPrefix = "."

// maxTempSuffixDigits is the most digits renameio appends: the decimal form
// of a non-negative random int64 (renameio/v2 openTempFile) has at most 19.
const maxTempSuffixDigits = 19

func (fp Failpoint) hit(step Step, path string) error {
	if fp == nil {
		return nil
	}
	return fp(step, path)
}

// WriteFile replaces path with data: temporary file beside it, fsync,
// rename, fsync of the directory. opts set the file's permissions
// (renameio.WithStaticPermissions, or WithPermissions and
// WithExistingPermissions); the temporary file always lives in path's
// directory, so the rename never crosses file systems.
func WriteFile(path string, data []byte, fp Failpoint, opts ...renameio.Option) error {
	dir := filepath.Dir(path)
	pending, err := renameio.NewPendingFile(path, append([]renameio.Option{renameio.WithTempDir(dir)}, opts...)...)
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
		err := fp.hit(step, path)
		crashed = errors.Is(err, ErrSimulatedCrash)
		return err
	}
	if _, err := pending.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := hit(StepTempWritten); err != nil {
		return err
	}
	// CloseAtomicallyReplace fsyncs too; this earlier fsync only gives a
	// test a point between the fsync and the rename.
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
	if err := SyncDir(dir); err != nil {
		return err
	}
	return hit(StepDirSynced)
}

// Remove unlinks path and fsyncs its directory; a missing file is not an
// error.
func Remove(path string, fp Failpoint) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if err := fp.hit(StepRemoved, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory so that renames and unlinks in it are durable.
func SyncDir(dir string) error {
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

// IsTempFor reports whether name is one WriteFile could give a temporary
// file for target (a base name): "." + target + decimal digits.
func IsTempFor(name, target string) bool {
	suffix, ok := strings.CutPrefix(name, TempPrefix+target)
	if !ok || suffix == "" || len(suffix) > maxTempSuffixDigits {
		return false
	}
	for _, c := range suffix {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// RemoveTemps removes the regular files in dir whose names isTemp accepts,
// and fsyncs dir when it removed any. It returns the paths it removed, also
// when it fails part way. A missing dir holds nothing to remove. It must run
// before its owner's first WriteFile in dir, so that no file it removes is
// one a live write still uses.
func RemoveTemps(dir string, isTemp func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing %s for stale temporary files: %w", dir, err)
	}
	var removed []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTemp(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("removing stale temporary file %s: %w", path, err)
		}
		removed = append(removed, path)
	}
	if len(removed) == 0 {
		return nil, nil
	}
	return removed, SyncDir(dir)
}
