package graph

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestNewInformersNarrowEveryRequest: every list and watch the informers
// make carries the selectors that keep them narrow (bound pods, eligible
// ConfigMaps), and Nodes carry none.
func TestNewInformersNarrowEveryRequest(t *testing.T) {
	client := fake.NewClientset()
	meta := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	informers, err := NewInformers(client, meta, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, inf := range []interface{ RunWithContext(context.Context) }{informers.Nodes, informers.Pods, informers.ConfigMaps} {
		go inf.RunWithContext(ctx)
	}

	type want struct{ fields, labels string }
	wants := map[string]want{
		"nodes":      {},
		"pods":       {fields: "spec.nodeName!="},
		"configmaps": {labels: contract.EligibleLabel + "=" + contract.EligibleLabelValue},
	}
	actions := func() []clienttesting.Action { return append(client.Actions(), meta.Actions()...) }
	// Each informer lists, then watches.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		watched := map[string]bool{}
		for _, a := range actions() {
			if a.GetVerb() == "watch" {
				watched[a.GetResource().Resource] = true
			}
		}
		return len(watched) == len(wants), nil
	})
	if err != nil {
		t.Fatalf("the informers did not all list and watch: %v", actions())
	}
	seen := map[string]map[string]bool{}
	for _, a := range actions() {
		var opts metav1.ListOptions
		switch a := a.(type) {
		case clienttesting.ListActionImpl:
			opts = a.GetListOptions()
		case clienttesting.WatchActionImpl:
			opts = a.GetListOptions()
		default:
			continue
		}
		resource := a.GetResource().Resource
		w, ok := wants[resource]
		if !ok {
			t.Errorf("%s of an unexpected resource %s", a.GetVerb(), resource)
			continue
		}
		if opts.FieldSelector != w.fields || opts.LabelSelector != w.labels {
			t.Errorf("%s %s: fieldSelector %q labelSelector %q, want %q %q", a.GetVerb(), resource, opts.FieldSelector, opts.LabelSelector, w.fields, w.labels)
		}
		if seen[resource] == nil {
			seen[resource] = map[string]bool{}
		}
		seen[resource][a.GetVerb()] = true
	}
	for resource := range wants {
		if !seen[resource]["list"] || !seen[resource]["watch"] {
			t.Errorf("%s: verbs seen %v, want list and watch", resource, seen[resource])
		}
	}
}
