package images

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Defaults for what Build cannot learn from git.
const (
	DefaultRegistry = "ghcr.io/nodeguard"
	// FallbackVersion is the version of a build outside a git checkout (a
	// CI tarball), where `git describe` has nothing to say.
	FallbackVersion = "v0.0.0-dev"
	// Source is org.opencontainers.image.source.
	Source = "https://github.com/nodeguard/nodeguard"
	// Licenses is org.opencontainers.image.licenses.
	Licenses = "Apache-2.0"
	// UnknownRevision is org.opencontainers.image.revision outside git.
	UnknownRevision = "unknown"
)

// SourceInfo is what the images say about the source they were built from.
type SourceInfo struct {
	// Version tags the images and is org.opencontainers.image.version.
	Version string
	// Revision is the commit, or UnknownRevision.
	Revision string
	// Epoch is SOURCE_DATE_EPOCH: every timestamp in the images.
	Epoch time.Time
}

// DetectSource fills what info leaves empty from the git checkout at dir:
// the version from `git describe --tags --always --dirty`, the revision from
// HEAD and the epoch from HEAD's commit time. Without git (or outside a
// checkout) they are FallbackVersion, UnknownRevision and fallbackEpoch.
// A zero info.Epoch means "detect"; pass a non-zero one to override.
func DetectSource(ctx context.Context, dir string, info SourceInfo, fallbackEpoch time.Time) (SourceInfo, error) {
	if info.Version == "" {
		v, err := git(ctx, dir, "describe", "--tags", "--always", "--dirty")
		switch {
		case err == nil && v != "":
			info.Version = v
		case err == nil || errors.Is(err, errNoGit):
			info.Version = FallbackVersion
		default:
			return info, err
		}
	}
	if info.Revision == "" {
		rev, err := git(ctx, dir, "rev-parse", "HEAD")
		switch {
		case err == nil && rev != "":
			info.Revision = rev
		case err == nil || errors.Is(err, errNoGit):
			info.Revision = UnknownRevision
		default:
			return info, err
		}
	}
	if info.Epoch.IsZero() {
		info.Epoch = fallbackEpoch.UTC()
		ct, err := git(ctx, dir, "log", "-1", "--format=%ct")
		switch {
		case err == nil && ct != "":
			secs, perr := strconv.ParseInt(ct, 10, 64)
			if perr != nil {
				return info, fmt.Errorf("parsing the commit time %q from git log: %w", ct, perr)
			}
			info.Epoch = time.Unix(secs, 0).UTC()
		case err == nil || errors.Is(err, errNoGit):
		default:
			return info, err
		}
	}
	return info, nil
}

// errNoGit means there is no git to ask, or dir is not in a checkout: a
// reason to fall back, where any other failure (a context cancelled) is not.
var errNoGit = errors.New("not a git checkout")

func git(ctx context.Context, dir string, args ...string) (string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", errNoGit
	}
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), ctx.Err())
	}
	if err != nil {
		// Not a checkout, no commit yet, no tag for describe --always to
		// fall back from: all mean the same to a build.
		return "", errNoGit
	}
	return strings.TrimSpace(string(out)), nil
}
