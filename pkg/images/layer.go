package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BinaryDir is where each image holds its program.
const BinaryDir = "/usr/local/bin"

// layerEntry is one file of the layer. The layer is made of a handful of
// them, written in name order, all owned by root unless said otherwise, all
// with the same mtime, so that its bytes depend only on the binary.
type layerEntry struct {
	name     string // relative, no leading slash; directories end in '/'
	mode     int64
	uid, gid int
	body     []byte // files other than the binary
	file     string // the binary: copied from this path
}

// layerEntries lists the layer of program's image, with its binary at
// binaryPath.
func layerEntries(program string, binaryPath string) []layerEntry {
	// /etc/passwd and /etc/group name the users the images run as, so that
	// `id`, os/user and runtimes that resolve a user's groups find them;
	// "nonexistent" homes say no program is meant to write there.
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:" + strconv.Itoa(nonroot) + ":" + strconv.Itoa(nonroot) + ":nonroot:/nonexistent:/sbin/nologin\n"
	group := "root:x:0:\n" + "nonroot:x:" + strconv.Itoa(nonroot) + ":\n"
	entries := []layerEntry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		// A world-writable, sticky /tmp, as on any host: os.TempDir() is
		// /tmp, and a read-only root filesystem mounts an emptyDir here.
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: path.Join(BinaryDir[1:], program), mode: 0o755, file: binaryPath},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries
}

// writeLayerTar writes entries as a tar stream, every header with mtime
// epoch and in USTAR format (no PAX records carrying access or change
// times), so two builds write the same bytes.
func writeLayerTar(w io.Writer, entries []layerEntry, epoch time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			Uname:   "root",
			Gname:   "root",
			ModTime: epoch,
			Format:  tar.FormatUSTAR,
		}
		if err := writeLayerEntry(tw, hdr, e); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing the layer's tar stream: %w", err)
	}
	return nil
}

func writeLayerEntry(tw *tar.Writer, hdr *tar.Header, e layerEntry) error {
	var body io.Reader
	switch {
	case e.name[len(e.name)-1] == '/':
		hdr.Typeflag = tar.TypeDir
	case e.file != "":
		f, err := os.Open(e.file)
		if err != nil {
			return fmt.Errorf("opening the binary for the layer: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("reading the size of %s: %w", e.file, err)
		}
		hdr.Typeflag, hdr.Size, body = tar.TypeReg, st.Size(), f
	default:
		hdr.Typeflag, hdr.Size, body = tar.TypeReg, int64(len(e.body)), bytes.NewReader(e.body)
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing the tar header of %s: %w", e.name, err)
	}
	if body != nil {
		if _, err := io.Copy(tw, body); err != nil {
			return fmt.Errorf("writing %s into the layer: %w", e.name, err)
		}
	}
	return nil
}

// buildLayer makes program's layer from its binary. It gzips the tar once,
// in memory, and hands the compressed bytes to go-containerregistry, which
// then only decompresses (cheap) to compute the diff ID: left to compress an
// uncompressed tar itself, it would gzip a binary of tens of megabytes once
// for the digest and again for every write.
func buildLayer(program, binaryPath string, epoch time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	// The gzip header carries no name and a zero mtime, so it adds nothing
	// that varies between builds.
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, fmt.Errorf("starting gzip: %w", err)
	}
	if err := writeLayerTar(zw, layerEntries(program, binaryPath), epoch); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("finishing the gzip stream of %s's layer: %w", program, err)
	}
	compressed := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making %s's layer: %w", program, err)
	}
	return layer, nil
}
