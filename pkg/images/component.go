package images

import (
	"bytes"
	"fmt"

	"github.com/google/renameio/v2"
)

// The files Build writes beside the archives.
const (
	DigestsFile   = "digests.txt"
	ComponentFile = "kustomization.yaml"
	ValuesFile    = "values.yaml"
)

// WriteDigests writes digests.txt: a comment, then one line per program,
// fields separated by one space so that `awk` or `read` take them apart:
//
//	program reference index-digest platform=image-digest...
func WriteDigests(path, registry string, info SourceInfo, built []Built) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# nodeguard %s (revision %s) for %s.\n", info.Version, info.Revision, registry)
	fmt.Fprintf(&b, "# program reference index-digest platform=image-digest...\n")
	for _, x := range built {
		fmt.Fprintf(&b, "%s %s %s", x.Program.Name, x.Reference, x.Digest)
		for i, d := range x.Images {
			fmt.Fprintf(&b, " %s=%s", platformString(x.Platforms[i]), d)
		}
		b.WriteByte('\n')
	}
	return writeFile(path, b.Bytes())
}

// WriteComponent writes the kustomize Component that maps the symbolic
// image names of manifests/ to the built indexes by digest, so that an
// overlay listing it under components: deploys exactly these images,
// whatever the tag later points at.
func WriteComponent(path, registry string, info SourceInfo, built []Built) error {
	var b bytes.Buffer
	header(&b, info, "from an overlay: components: [<path to this directory>]")
	fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nimages:\n")
	for _, x := range built {
		fmt.Fprintf(&b, "  - name: %s\n    newName: %s\n    digest: %s\n", x.Program.KustomizeName, Repository(registry, x.Program), x.Digest)
	}
	return writeFile(path, b.Bytes())
}

// WriteValues writes the Helm values that point charts/nodeguard at the
// built indexes by digest (helm install -f), the chart's counterpart of the
// component. The tag is the version they were built as; the chart uses the
// digest whenever one is set.
func WriteValues(path, registry string, info SourceInfo, built []Built) error {
	var b bytes.Buffer
	header(&b, info, "with the chart: helm install ... charts/nodeguard -f <this file>")
	fmt.Fprintf(&b, "images:\n")
	for _, x := range built {
		fmt.Fprintf(&b, "  %s:\n    repository: %s\n    digest: %s\n    tag: %s\n", x.Program.ValuesKey, Repository(registry, x.Program), x.Digest, info.Version)
	}
	return writeFile(path, b.Bytes())
}

// header says what the file pins and how to use it.
func header(b *bytes.Buffer, info SourceInfo, use string) {
	fmt.Fprintf(b, "# nodeguard %s (revision %s): the images `make images` built, by digest.\n", info.Version, info.Revision)
	fmt.Fprintf(b, "# Use it %s (docs/images.md).\n", use)
}

// writeFile replaces path whole, so a reader never sees half a file.
func writeFile(path string, data []byte) error {
	if err := renameio.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
