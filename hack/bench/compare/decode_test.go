package compare

import (
	"encoding/json"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// BenchmarkReviewDecode measures decoding one SubjectAccessReview body the
// way pkg/authz does (sigs.k8s.io/json through apimachinery's util/json)
// against encoding/json, on the caller's goroutine and on a fresh one per
// review, which is what the HTTP/2 server gives every request: a fresh
// goroutine starts with a small stack and the decoder's recursion grows it.
func BenchmarkReviewDecode(b *testing.B) {
	shape := cluster.Shape{Nodes: 10, PodsPerNode: 2, Namespaces: 2}
	body, err := json.Marshal(shape.Requests(cluster.AllowedRead, 1, 1)[0].Review())
	if err != nil {
		b.Fatal(err)
	}
	decoders := []struct {
		name   string
		decode func([]byte) error
	}{
		{"apimachinery-utiljson", func(body []byte) error {
			var sar authorizationv1.SubjectAccessReview
			return utiljson.Unmarshal(body, &sar)
		}},
		{"encoding-json", func(body []byte) error {
			var sar authorizationv1.SubjectAccessReview
			return json.Unmarshal(body, &sar)
		}},
		{"apimachinery-utiljson-narrow", func(body []byte) error {
			var sar narrowReview
			return utiljson.Unmarshal(body, &sar)
		}},
	}
	for _, d := range decoders {
		b.Run(d.name+"/same-goroutine", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := d.decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(d.name+"/fresh-goroutine", func(b *testing.B) {
			b.ReportAllocs()
			done := make(chan error)
			for b.Loop() {
				go func() { done <- d.decode(body) }()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// narrowReview is only what the authorizer reads of a review: decoding
// into it skips metadata, spec.extra, spec.uid and status.
type narrowReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		User                  string                                 `json:"user"`
		Groups                []string                               `json:"groups"`
		ResourceAttributes    *authorizationv1.ResourceAttributes    `json:"resourceAttributes"`
		NonResourceAttributes *authorizationv1.NonResourceAttributes `json:"nonResourceAttributes"`
	} `json:"spec"`
}
