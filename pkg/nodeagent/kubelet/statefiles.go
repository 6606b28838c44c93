package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nodeguard/nodeguard/pkg/durable"
)

// DefaultRootDir is the kubelet's --root-dir default, where it keeps its
// managers' state files.
const DefaultRootDir = "/var/lib/kubelet"

// StateFiles are the kubelet's state files in its root directory.
type StateFiles struct {
	RootDir string
}

// Remove deletes the named state files (plain names in the root
// directory; a missing one is already removed) and makes the removals
// durable. The kubelet must be stopped: a running one writes its state
// again.
func (s StateFiles) Remove(names []string) error {
	if len(names) == 0 {
		return nil
	}
	if s.RootDir == "" {
		return errors.New("removing the kubelet's state files: no kubelet root directory given")
	}
	if _, err := os.Stat(s.RootDir); errors.Is(err, fs.ErrNotExist) {
		// No root directory, so no state: a kubelet that never ran.
		return nil
	}
	for _, name := range names {
		if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
			return fmt.Errorf("refusing to remove %q: not a plain file name", name)
		}
		path := filepath.Join(s.RootDir, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the kubelet's state file %s: %w", path, err)
		}
	}
	return durable.SyncDir(s.RootDir)
}
