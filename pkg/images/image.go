package images

import (
	"fmt"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The OCI annotation keys (image-spec annotations.md) every image, index and
// layout descriptor carries.
const (
	AnnotationSource      = "org.opencontainers.image.source"
	AnnotationRevision    = "org.opencontainers.image.revision"
	AnnotationVersion     = "org.opencontainers.image.version"
	AnnotationLicenses    = "org.opencontainers.image.licenses"
	AnnotationTitle       = "org.opencontainers.image.title"
	AnnotationDescription = "org.opencontainers.image.description"
	AnnotationCreated     = "org.opencontainers.image.created"
	// AnnotationRefName names a manifest in an image layout: the tag alone,
	// as the image spec suggests and podman reads it.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationImageName is containerd's full image name in a layout, which
	// ctr images import, kind load image-archive and docker load (Engine
	// 25+, whose image store reads archives the way containerd does) use.
	AnnotationImageName = "io.containerd.image.name"
)

// Annotations are the OCI annotations of program's images and index; the
// same map is the images' config labels, so `docker inspect` shows them.
func Annotations(p Program, info SourceInfo) map[string]string {
	return map[string]string{
		AnnotationSource:      Source,
		AnnotationRevision:    info.Revision,
		AnnotationVersion:     info.Version,
		AnnotationLicenses:    Licenses,
		AnnotationTitle:       "nodeguard-" + p.Name,
		AnnotationDescription: p.Description,
		AnnotationCreated:     info.Epoch.UTC().Format(time.RFC3339),
	}
}

// Repository is program's image repository under registry.
func Repository(registry string, p Program) string {
	return registry + "/" + p.Name
}

// buildImage wraps program's layer for platform in an image from scratch.
func buildImage(p Program, platform v1.Platform, layer v1.Layer, info SourceInfo) (v1.Image, error) {
	created := v1.Time{Time: info.Epoch.UTC()}
	cfg := &v1.ConfigFile{
		Architecture: platform.Architecture,
		OS:           platform.OS,
		Variant:      platform.Variant,
		Created:      created,
		Config: v1.Config{
			Entrypoint: []string{path.Join(BinaryDir, p.Name)},
			// Without PATH, a runtime's own default applies: set it so
			// that `kubectl exec` finds nothing surprising either way.
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			WorkingDir: "/",
			User:       p.User,
			Labels:     Annotations(p, info),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting the config of %s for %s: %w", p.Name, platformString(platform), err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "hack/images: " + p.Name + " binary, /etc/passwd, /etc/group, /tmp",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer of %s for %s: %w", p.Name, platformString(platform), err)
	}
	annotated, ok := mutate.Annotations(img, Annotations(p, info)).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotating %s for %s: go-containerregistry returned no image", p.Name, platformString(platform))
	}
	return annotated, nil
}

// buildIndex gathers program's images, one per platform in Platforms'
// order, into an OCI index.
func buildIndex(p Program, imgs []v1.Image, info SourceInfo) (v1.ImageIndex, error) {
	platforms := Platforms()
	if len(imgs) != len(platforms) {
		return nil, fmt.Errorf("index of %s: %d images for %d platforms", p.Name, len(imgs), len(platforms))
	}
	adds := make([]mutate.IndexAddendum, len(imgs))
	for i, img := range imgs {
		platform := platforms[i]
		adds[i] = mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}}
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	annotated, ok := mutate.Annotations(idx, Annotations(p, info)).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("annotating the index of %s: go-containerregistry returned no index", p.Name)
	}
	return annotated, nil
}
