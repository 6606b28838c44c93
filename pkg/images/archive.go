package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/renameio/v2"
)

// ArchiveName is the file name of program's archive in an output directory.
func ArchiveName(p Program) string { return p.Name + ".oci.tar" }

// writeArchive writes idx as an OCI image layout tarball at dest, its one
// index.json entry annotated with the tag (ref.name) and the full name
// (io.containerd.image.name) loaders name the image by. The layout is
// assembled by go-containerregistry in a scratch directory beside dest,
// then packed in name order with fixed owners, modes and mtimes, since the
// files' own metadata (a umask, the build's time) must not reach the tar.
func writeArchive(dest string, idx v1.ImageIndex, ref string, version string, epoch time.Time) error {
	scratch, err := os.MkdirTemp(filepath.Dir(dest), ".layout-")
	if err != nil {
		return fmt.Errorf("making a scratch directory for the image layout: %w", err)
	}
	defer os.RemoveAll(scratch)
	lp, err := layout.Write(scratch, empty.Index)
	if err != nil {
		return fmt.Errorf("starting the image layout: %w", err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		AnnotationRefName:   version,
		AnnotationImageName: ref,
	})); err != nil {
		return fmt.Errorf("writing the index into the image layout: %w", err)
	}

	var files []string
	err = filepath.WalkDir(scratch, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == scratch {
			return nil
		}
		rel, err := filepath.Rel(scratch, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the image layout: %w", err)
	}
	sort.Strings(files)

	out, err := renameio.NewPendingFile(dest, renameio.WithPermissions(0o644))
	if err != nil {
		return fmt.Errorf("creating the archive: %w", err)
	}
	defer out.Cleanup() // a no-op once replaced
	if err := packLayout(out, scratch, files, epoch); err != nil {
		return fmt.Errorf("writing %s: %w", dest, err)
	}
	if err := out.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("moving the archive into place: %w", err)
	}
	return nil
}

func packLayout(w io.Writer, root string, files []string, epoch time.Time) error {
	tw := tar.NewWriter(w)
	for _, name := range files {
		hdr := &tar.Header{Name: name, ModTime: epoch, Uname: "root", Gname: "root", Format: tar.FormatUSTAR}
		if strings.HasSuffix(name, "/") {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, st.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			f.Close()
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// Archive is an image layout tarball read back.
type Archive struct {
	// Reference is the io.containerd.image.name of its index.json entry:
	// REGISTRY/program:VERSION, as built.
	Reference string
	// Descriptor is that entry: the index's digest and annotations.
	Descriptor v1.Descriptor
	// Index is the multi-platform index, reading from the extracted layout.
	Index v1.ImageIndex
	// Layout is the directory the archive was extracted into.
	Layout layout.Path
}

// OpenArchive extracts the archive at path into dir, which must be empty or
// absent and stays in use as long as the Archive is, and returns its one
// index.
func OpenArchive(path, dir string) (*Archive, error) {
	if err := extract(path, dir); err != nil {
		return nil, fmt.Errorf("extracting %s: %w", path, err)
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI image layout: %w", path, err)
	}
	outer, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading index.json of %s: %w", path, err)
	}
	im, err := outer.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading index.json of %s: %w", path, err)
	}
	if len(im.Manifests) != 1 {
		return nil, fmt.Errorf("%s: index.json lists %d entries, want the one index Build writes", path, len(im.Manifests))
	}
	desc := im.Manifests[0]
	if !desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("%s: index.json's entry is a %s, want an image index", path, desc.MediaType)
	}
	idx, err := outer.ImageIndex(desc.Digest)
	if err != nil {
		return nil, fmt.Errorf("reading the index %s of %s: %w", desc.Digest, path, err)
	}
	ref := desc.Annotations[AnnotationImageName]
	if ref == "" {
		return nil, fmt.Errorf("%s: index.json's entry has no %s annotation; was it written by hack/images?", path, AnnotationImageName)
	}
	return &Archive{Reference: ref, Descriptor: desc, Index: idx, Layout: lp}, nil
}

// extract unpacks a tar of regular files and directories (what writeArchive
// writes) and refuses anything else or any name leaving dir.
func extract(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.FromSlash(strings.TrimSuffix(hdr.Name, "/"))
		if !filepath.IsLocal(name) {
			return fmt.Errorf("entry %q leaves the layout", hdr.Name)
		}
		target := filepath.Join(dir, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q is of tar type %q; an image layout holds only files and directories", hdr.Name, hdr.Typeflag)
		}
	}
}
