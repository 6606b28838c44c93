package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushOptions say what Push pushes and where.
type PushOptions struct {
	// OutputDir is Build's output directory.
	OutputDir string
	// Registry must be the one the archives were built for: the archives
	// name it, and so do the component's digests and the manifests using
	// them, so pushing elsewhere would publish images nothing refers to.
	Registry string
	// Version, when set, must be the version the archives were built for.
	Version string
	// Insecure lets the registry answer over plain HTTP when HTTPS fails;
	// TLS, when used, is verified all the same.
	Insecure bool
	// Keychain finds credentials; nil means authn.DefaultKeychain (docker's
	// config.json, $DOCKER_CONFIG, credential helpers).
	Keychain authn.Keychain
	// Transport, when set, carries every request (tests use it).
	Transport http.RoundTripper
	// Log receives one line per index pushed; nil discards them.
	Log io.Writer
}

// Pushed is one index written to a registry.
type Pushed struct {
	Reference string // REGISTRY/program:VERSION
	Digest    v1.Hash
}

// Push writes every program's index, its images and their blobs, tagged
// with the version they were built for. It checks every archive before it
// writes anything, so a mismatched registry pushes nothing.
func Push(ctx context.Context, o PushOptions) ([]Pushed, error) {
	if o.Registry == "" {
		return nil, errors.New("no registry to push to")
	}
	if o.OutputDir == "" {
		return nil, errors.New("no output directory")
	}
	keychain := o.Keychain
	if keychain == nil {
		keychain = authn.DefaultKeychain
	}
	var nameOpts []name.Option
	if o.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	work, err := os.MkdirTemp("", "nodeguard-push-")
	if err != nil {
		return nil, fmt.Errorf("making a directory to extract the archives into: %w", err)
	}
	defer os.RemoveAll(work)

	programs := Programs()
	tags := make([]name.Tag, len(programs))
	archives := make([]*Archive, len(programs))
	for i, p := range programs {
		path := filepath.Join(o.OutputDir, ArchiveName(p))
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s is missing: run `make images REGISTRY=%s` first", path, o.Registry)
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		a, err := OpenArchive(path, filepath.Join(work, p.Name))
		if err != nil {
			return nil, err
		}
		tag, err := name.NewTag(a.Reference, append([]name.Option{name.StrictValidation}, nameOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("%s names %q, not an image reference: %w", path, a.Reference, err)
		}
		if want := Repository(o.Registry, p); tag.Context().Name() != mustRepository(want, nameOpts) {
			return nil, fmt.Errorf("%s was built for %s, not %s: run `make images REGISTRY=%s` first",
				path, tag.Context().Name(), want, o.Registry)
		}
		if o.Version != "" && tag.TagStr() != o.Version {
			return nil, fmt.Errorf("%s was built for version %s, not %s: run `make images VERSION=%s` first",
				path, tag.TagStr(), o.Version, o.Version)
		}
		tags[i], archives[i] = tag, a
	}

	remoteOpts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain)}
	if o.Transport != nil {
		remoteOpts = append(remoteOpts, remote.WithTransport(o.Transport))
	}
	pushed := make([]Pushed, 0, len(programs))
	for i, tag := range tags {
		if err := remote.WriteIndex(tag, archives[i].Index, remoteOpts...); err != nil {
			return pushed, fmt.Errorf("pushing %s: %w", tag, err)
		}
		d := archives[i].Descriptor.Digest
		pushed = append(pushed, Pushed{Reference: tag.String(), Digest: d})
		if o.Log != nil {
			fmt.Fprintf(o.Log, "pushed %s@%s\n", tag, d)
		}
	}
	return pushed, nil
}

// mustRepository normalises repo the way name.NewTag does (index.docker.io
// for Docker Hub names), so the comparison is of like with like; a registry
// that does not parse never equals a parsed one.
func mustRepository(repo string, opts []name.Option) string {
	r, err := name.NewRepository(repo, opts...)
	if err != nil {
		return "invalid repository " + repo
	}
	return r.Name()
}
