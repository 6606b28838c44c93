package kubelet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/klog/v2"
)

// ownedHeader opens every file the agent renders from a ConfigMap. The local
// configuration, written when nothing is assigned, is copied verbatim and
// carries no header, so a kubelet file with it holds an assigned
// configuration, never the node's own.
const ownedHeader = ownedMarker + "; changes are overwritten.\n"

// ownedMarker marks a file as the agent's, at the start of a line.
const ownedMarker = "# Written by the nodeguard agent"

// restoreRunbook is where operators are sent when the local configuration
// cannot be seeded.
const restoreRunbook = `docs/install.md, Runbook, "A node is stuck in rollback"`

// owned reports whether data is a file the agent wrote from a ConfigMap:
// some line of it starts with the agent's header.
func owned(data []byte) bool {
	return bytes.HasPrefix(data, []byte(ownedMarker)) || bytes.Contains(data, []byte("\n"+ownedMarker))
}

// SeedLocalConfig makes localPath, the node's own configuration in
// ModeConfig, when it does not exist: a copy, byte for byte, of the
// kubelet's current file at kubeletPath. An existing localPath is left as it
// is, whatever it holds. It refuses a kubelet file the agent wrote (owned):
// that is an assigned configuration, and seeding it would make a
// configuration shared by many nodes this node's own, with nothing to roll
// back to. Only a human can restore the node's own file then.
//
// The copy is written as the kubelet's file is (ConfigFile.Write: a
// temporary file beside it, fsync, rename, fsync of the directory), so a
// crash leaves either no localPath, and the next start seeds again, or a
// complete one. The temporary files such a crash leaves are removed first.
// It must run under the state directory's lock, before the agent renders
// anything, since rendering reads localPath.
func SeedLocalConfig(ctx context.Context, localPath, kubeletPath string) error {
	logger := klog.FromContext(ctx)
	local := ConfigFile{Path: localPath}
	// Failing to remove a leftover costs only disk space; it never reads
	// as the local file, whose name it does not have.
	if err := local.RemoveStaleTemps(ctx); err != nil {
		logger.Error(err, "Could not remove stale temporary files of the local configuration; continuing")
	}
	switch _, err := os.Lstat(localPath); {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("checking the local kubelet configuration %s: %w", localPath, err)
	}
	data, err := os.ReadFile(kubeletPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the local kubelet configuration %s does not exist, and cannot be seeded from the kubelet's configuration %s, which does not exist either: %w", localPath, kubeletPath, err)
	case err != nil:
		return fmt.Errorf("the local kubelet configuration %s does not exist, and cannot be seeded from the kubelet's configuration: %w", localPath, err)
	case len(bytes.TrimSpace(data)) == 0:
		return fmt.Errorf("the local kubelet configuration %s does not exist, and cannot be seeded from the kubelet's configuration %s, which is empty", localPath, kubeletPath)
	case owned(data):
		return fmt.Errorf("the local kubelet configuration %s does not exist, and the kubelet's configuration %s was written by the nodeguard agent (an assigned configuration, not this node's own), so it cannot be seeded from it: restore %s by hand from the node's image or configuration management (%s), then start the agent again", localPath, kubeletPath, localPath, restoreRunbook)
	}
	if err := local.Write(Rendered{Data: data}); err != nil {
		return fmt.Errorf("seeding the local kubelet configuration: %w", err)
	}
	logger.Info("Seeded the local kubelet configuration from the kubelet's", "path", localPath, "from", kubeletPath, "bytes", len(data), "sha256", Checksum(data))
	return nil
}
