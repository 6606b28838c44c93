package kubelet

import (
	"context"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/durable"
)

// RemoveStaleTemps removes the temporary files that an interrupted Write
// left beside the file: a kill between the temporary file's creation and
// its rename leaves one behind, and nothing else would ever remove it. It
// must run before the agent's first Write, so that no file it removes is one
// a live write still uses. The directory is usually the kubelet's and holds
// other people's files, so only names Write could have made for this very
// file are touched, and only regular files.
func (f ConfigFile) RemoveStaleTemps(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	target := filepath.Base(f.Path)
	removed, err := durable.RemoveTemps(filepath.Dir(f.Path), func(name string) bool { return durable.IsTempFor(name, target) })
	for _, path := range removed {
		logger.Info("Removed a temporary file left by an interrupted write", "path", path, "target", f.Path)
	}
	return err
}
