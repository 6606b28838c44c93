// Package images builds nodeguard's container images and pushes them.
//
// For each program that runs in a cluster (cmd/webhook, cmd/agent,
// cmd/rollout-controller) it compiles a static binary for linux/amd64 and
// linux/arm64, puts it in a single-layer image built from scratch (no base
// image: none can be pulled where nodeguard is built, and a static Go binary
// needs none), and gathers the two images into one OCI image index. Every
// timestamp is SOURCE_DATE_EPOCH and every list is sorted, so two builds of
// one commit with one toolchain give the same digests.
//
// Build writes, into one output directory:
//
//   - <program>.oci.tar: an OCI image layout tarball holding the index, named
//     for docker load, podman load, ctr images import and kind load
//     image-archive by the annotations of its index.json;
//   - digests.txt: the reference and digests of every index and image;
//   - kustomization.yaml: a kustomize Component pinning the manifests'
//     symbolic image names to those digests;
//   - values.yaml: the same digests as Helm values for charts/nodeguard.
//
// Push reads those archives back and writes each index, with its images, to
// the registry it was built for. docs/images.md is the user's reference.
package images
