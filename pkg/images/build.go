package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
)

// BuildOptions say what Build builds and where.
type BuildOptions struct {
	// ModuleDir is the root of the nodeguard module, where go build runs.
	// Empty means the module `go env GOMOD` finds from the working directory.
	ModuleDir string
	// OutputDir receives the archives, digests.txt, kustomization.yaml and
	// values.yaml.
	OutputDir string
	// Registry is the prefix of every repository, e.g. ghcr.io/nodeguard.
	Registry string
	// Source is the version, revision and epoch (see DetectSource).
	Source SourceInfo
	// Go is the go command; empty means "go" from PATH.
	Go string
	// Jobs bounds how many go builds, and then how many images, are made at
	// once: each is CPU-bound, and go build parallelises within itself.
	Jobs int
	// Log receives one line per step; nil discards them.
	Log io.Writer
}

// Built is one program's index as Build wrote it.
type Built struct {
	Program Program
	// Reference is REGISTRY/program:VERSION.
	Reference string
	// Digest is the index's digest.
	Digest v1.Hash
	// Platforms and Images are the index's images, in Platforms' order.
	Platforms []v1.Platform
	Images    []v1.Hash
}

// DigestReference is REGISTRY/program@sha256:..., the reference that pins
// the index.
func (b Built) DigestReference(registry string) string {
	return Repository(registry, b.Program) + "@" + b.Digest.String()
}

// Build compiles every program for every platform, builds their images and
// indexes and writes the output directory's files.
func Build(ctx context.Context, o BuildOptions) ([]Built, error) {
	if err := o.complete(ctx); err != nil {
		return nil, err
	}
	programs, platforms := Programs(), Platforms()
	refs := make([]string, len(programs))
	for i, p := range programs {
		ref, err := name.NewTag(Repository(o.Registry, p)+":"+o.Source.Version, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("registry %q and version %q do not make an image reference: %w", o.Registry, o.Source.Version, err)
		}
		refs[i] = ref.String()
	}
	if err := os.MkdirAll(o.OutputDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the output directory: %w", err)
	}
	work, err := os.MkdirTemp("", "nodeguard-images-")
	if err != nil {
		return nil, fmt.Errorf("making a directory for the binaries: %w", err)
	}
	defer os.RemoveAll(work)

	// One go build per platform, building the three programs together: the
	// packages they share are compiled once, and two builds (one per
	// architecture) keep two cores busy.
	binDirs := make([]string, len(platforms))
	err = forEach(ctx, o.Jobs, len(platforms), func(i int) error {
		binDirs[i] = filepath.Join(work, platforms[i].OS+"_"+platforms[i].Architecture)
		return o.goBuild(ctx, platforms[i], programs, binDirs[i])
	})
	if err != nil {
		return nil, err
	}

	imgs := make([][]v1.Image, len(programs))
	for i := range imgs {
		imgs[i] = make([]v1.Image, len(platforms))
	}
	err = forEach(ctx, o.Jobs, len(programs)*len(platforms), func(k int) error {
		i, j := k/len(platforms), k%len(platforms)
		p, platform := programs[i], platforms[j]
		layer, err := buildLayer(p.Name, filepath.Join(binDirs[j], p.Name), o.Source.Epoch)
		if err != nil {
			return err
		}
		img, err := buildImage(p, platform, layer, o.Source)
		if err != nil {
			return err
		}
		// Computing the digest here, in parallel, is what costs: it reads
		// the layer back (gunzip) for its diff ID.
		if _, err := img.Digest(); err != nil {
			return fmt.Errorf("computing the digest of %s for %s: %w", p.Name, platformString(platform), err)
		}
		imgs[i][j] = img
		return nil
	})
	if err != nil {
		return nil, err
	}

	built := make([]Built, len(programs))
	err = forEach(ctx, o.Jobs, len(programs), func(i int) error {
		p := programs[i]
		idx, err := buildIndex(p, imgs[i], o.Source)
		if err != nil {
			return err
		}
		if err := writeArchive(filepath.Join(o.OutputDir, ArchiveName(p)), idx, refs[i], o.Source.Version, o.Source.Epoch); err != nil {
			return fmt.Errorf("archive of %s: %w", p.Name, err)
		}
		b := Built{Program: p, Reference: refs[i], Platforms: platforms}
		if b.Digest, err = idx.Digest(); err != nil {
			return fmt.Errorf("digest of %s's index: %w", p.Name, err)
		}
		for _, img := range imgs[i] {
			d, err := img.Digest()
			if err != nil {
				return fmt.Errorf("digest of an image of %s: %w", p.Name, err)
			}
			b.Images = append(b.Images, d)
		}
		built[i] = b
		o.logf("wrote %s: %s@%s", ArchiveName(p), refs[i], b.Digest)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := WriteDigests(filepath.Join(o.OutputDir, DigestsFile), o.Registry, o.Source, built); err != nil {
		return nil, err
	}
	if err := WriteComponent(filepath.Join(o.OutputDir, ComponentFile), o.Registry, o.Source, built); err != nil {
		return nil, err
	}
	if err := WriteValues(filepath.Join(o.OutputDir, ValuesFile), o.Registry, o.Source, built); err != nil {
		return nil, err
	}
	o.logf("wrote %s, %s and %s", DigestsFile, ComponentFile, ValuesFile)
	return built, nil
}

func (o *BuildOptions) complete(ctx context.Context) error {
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Jobs < 1 {
		o.Jobs = 1
	}
	if o.Registry == "" {
		return errors.New("no registry: set one, e.g. " + DefaultRegistry)
	}
	if o.OutputDir == "" {
		return errors.New("no output directory")
	}
	if o.Source.Version == "" || o.Source.Revision == "" {
		return errors.New("no version or revision: fill BuildOptions.Source with DetectSource")
	}
	if o.ModuleDir == "" {
		cmd := exec.CommandContext(ctx, o.Go, "env", "GOMOD")
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("finding the module root with go env GOMOD: %w", err)
		}
		gomod := strings.TrimSpace(string(out))
		if gomod == "" || gomod == os.DevNull {
			return errors.New("not inside the nodeguard module: run from its checkout or set the module directory")
		}
		o.ModuleDir = filepath.Dir(gomod)
	}
	return nil
}

// goBuild builds programs for platform into dir: static (no cgo), without
// file system paths (-trimpath), symbols, DWARF, build ID or VCS stamp, so
// that the same source and toolchain always give the same bytes.
func (o *BuildOptions) goBuild(ctx context.Context, platform v1.Platform, programs []Program, dir string) error {
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", dir + string(filepath.Separator)}
	for _, p := range programs {
		args = append(args, "./cmd/"+p.Name)
	}
	cmd := exec.CommandContext(ctx, o.Go, args...)
	cmd.Dir = o.ModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Env = append(cmd.Env, goarchEnv(platform)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	o.logf("go build for %s", platformString(platform))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w\n%s", platformString(platform), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func (o *BuildOptions) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// forEach runs fn(0..n-1) with at most jobs at once and returns the first
// error; after it, or once ctx ends, no further call starts.
func forEach(ctx context.Context, jobs, n int, fn func(i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(jobs, 1))
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
