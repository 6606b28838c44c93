package program

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// ContentTypeFlagHelp is the help of a --kube-api-content-type flag.
const ContentTypeFlagHelp = "Content type of requests sent to the kube-apiserver for built-in resources (Nodes, ConfigMaps, Pods, Leases, Events): " +
	runtime.ContentTypeProtobuf + " or " + runtime.ContentTypeJSON + ". Protobuf is what Kubernetes' own controllers use: a Node costs a fraction of the CPU to encode and decode, which a watch of thousands of Nodes pays on every kubelet's status write. nodeguard's own resources are always JSON."

// ValidateContentType checks a --kube-api-content-type value.
func ValidateContentType(contentType string) error {
	switch contentType {
	case runtime.ContentTypeProtobuf, runtime.ContentTypeJSON:
		return nil
	}
	return fmt.Errorf("--kube-api-content-type %q: must be %s or %s", contentType, runtime.ContentTypeProtobuf, runtime.ContentTypeJSON)
}

// WithContentType returns a copy of cfg for clients of built-in resources
// that sends contentType and accepts it first, JSON after it (the
// apiserver answers JSON for what has no protobuf, as custom resources).
// cfg itself stays JSON, for nodeguard's own resources.
func WithContentType(cfg *rest.Config, contentType string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.ContentType = contentType
	out.AcceptContentTypes = contentType
	if contentType != runtime.ContentTypeJSON {
		out.AcceptContentTypes += "," + runtime.ContentTypeJSON
	}
	return out
}
