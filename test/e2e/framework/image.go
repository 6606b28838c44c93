package framework

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WorkloadImage names the image of test/workload that every real-container node has imported
// into its containerd: its pod sandboxes' pause image, and the image of the tests' workloads,
// which run it with flags (test/workload's doc). The .test domain resolves nowhere, and pods
// use imagePullPolicy: Never: nothing is ever pulled.
const WorkloadImage = "nodeguard.test/workload:v1"

// workloadBinary is where the image holds test/workload.
const workloadBinary = "/workload"

// buildWorkloadImage builds test/workload, static, into dir and packs it as the only file of
// WorkloadImage, an OCI image layout in a tar (what `ctr images import` reads), returning the
// archive's path.
func buildWorkloadImage(ctx context.Context, dir string) (string, error) {
	paths, err := buildPackagesEnv(ctx, dir, []string{"CGO_ENABLED=0"}, "./test/workload")
	if err != nil {
		return "", err
	}
	binary, err := os.ReadFile(paths[0])
	if err != nil {
		return "", fmt.Errorf("reading the workload binary: %w", err)
	}
	// go-containerregistry gzips it, as OCILayer says.
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: workloadBinary[1:], Mode: 0o755, Size: int64(len(binary)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		return "", fmt.Errorf("the workload image's layer: %w", err)
	}
	if _, err := tw.Write(binary); err != nil {
		return "", fmt.Errorf("the workload image's layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("the workload image's layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return "", fmt.Errorf("the workload image's layer: %w", err)
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		return "", fmt.Errorf("the workload image: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("the workload image's configuration: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = runtime.GOARCH, runtime.GOOS
	cfg.Config.Entrypoint = []string{workloadBinary}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return "", fmt.Errorf("the workload image's configuration: %w", err)
	}
	layoutDir := filepath.Join(dir, "workload-image")
	if err := os.RemoveAll(layoutDir); err != nil {
		return "", err
	}
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return "", fmt.Errorf("the workload image's layout: %w", err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          WorkloadImage,
		"org.opencontainers.image.ref.name": "v1",
	})); err != nil {
		return "", fmt.Errorf("the workload image's layout: %w", err)
	}
	archive := filepath.Join(dir, "workload-image.oci.tar")
	if err := tarDirectory(layoutDir, archive); err != nil {
		return "", fmt.Errorf("the workload image's archive: %w", err)
	}
	return archive, nil
}

// tarDirectory writes the files under dir into a tar at dest, named relative to dir.
func tarDirectory(dir, dest string) error {
	f, err := os.Create(dest)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
