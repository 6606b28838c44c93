package install

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nodeguard/nodeguard/pkg/images"
	"github.com/nodeguard/nodeguard/test/controlplane"
)

// registry is where the test's images would be pushed: nowhere, since the
// fake runtime pulls nothing, but a name of the form `make images` takes.
const registry = "registry.install.test/nodeguard"

// builtImages is what the build produced for this run.
type builtImages struct {
	// component is the directory of the kustomize Component that sets the
	// workloads' images.
	component string
	// refs are the references the component sets, by program:
	// REGISTRY/program@sha256:<index digest>.
	refs map[string]string
}

// buildImages builds the images as `make images` does (pkg/images, the
// library behind it) into dir.
func buildImages(ctx context.Context, dir string) (builtImages, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return builtImages{}, err
	}
	// A fixed version and revision: the digests then depend on the source
	// alone, not on whether the checkout is clean.
	source, err := images.DetectSource(ctx, root, images.SourceInfo{Version: "v0.0.0-install-test", Revision: "install-test", Epoch: time.Unix(0, 0)}, time.Unix(0, 0))
	if err != nil {
		return builtImages{}, err
	}
	built, err := images.Build(ctx, images.BuildOptions{ModuleDir: root, OutputDir: dir, Registry: registry, Source: source, Log: os.Stderr})
	if err != nil {
		return builtImages{}, fmt.Errorf("building the images: %w", err)
	}
	b := builtImages{component: dir, refs: map[string]string{}}
	for _, x := range built {
		b.refs[x.Program.Name] = x.DigestReference(registry)
	}
	return b, nil
}

func (b builtImages) isBuilt(ref string) bool {
	for _, r := range b.refs {
		if r == ref {
			return true
		}
	}
	return false
}

func (b builtImages) String() string {
	var refs []string
	for _, r := range b.refs {
		refs = append(refs, r)
	}
	slices.Sort(refs)
	return strings.Join(refs, ", ")
}
