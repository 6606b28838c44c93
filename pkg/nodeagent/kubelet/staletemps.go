package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"
)

// maxTempSuffixDigits is the most digits renameio appends: it names a
// temporary file "." + target name + strconv.FormatInt of a non-negative
// random int64 (renameio/v2 openTempFile), at most 19 decimal digits.
const maxTempSuffixDigits = 19

// RemoveStaleTemps removes the temporary files that an interrupted Write
// left beside the file: a kill between renameio's create and rename leaves
// one behind, and nothing else would ever remove it. It must run before the
// agent's first Write, so that no file it removes is one a live write still
// uses. The directory is usually the kubelet's and holds other people's
// files, so only names renameio could have made for this very file are
// touched, and only regular files.
func (f ConfigFile) RemoveStaleTemps(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	dir, target := filepath.Dir(f.Path), filepath.Base(f.Path)
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("listing %s for stale temporary files: %w", dir, err)
	}
	removed := false
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTempName(e.Name(), target) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing stale temporary file %s: %w", path, err)
		}
		logger.Info("Removed a temporary file left by an interrupted write", "path", path, "target", f.Path)
		removed = true
	}
	if !removed {
		return nil
	}
	return syncDir(dir)
}

// isTempName reports whether name is one renameio could give a temporary
// file for target: "." + target + decimal digits.
func isTempName(name, target string) bool {
	suffix, ok := strings.CutPrefix(name, "."+target)
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
