package controller

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// guardableNode is readyNode as an apiserver holds it: with a UID and the
// annotations every kubelet's registration leaves, so that a JSON patch
// can test what the decision read, and a resourceVersion (which the fake's
// tracker does not keep: answerJSONPatches moves it on every write).
func guardableNode(name string, labels map[string]string) *corev1.Node {
	n := readyNode(name, labels)
	n.UID, n.ResourceVersion = types.UID("uid-"+name), "1"
	n.Annotations = map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
	return n
}

// answerJSONPatches has the fake apiserver apply JSON patches of Nodes as
// kube-apiserver does: over the Node as it is, with the JSON patch library
// it uses, answering a patch that does not apply with its 422 (the fake's
// own tracker returns the library's plain error). before, when set, runs
// first, as a write that reached the apiserver just ahead of the patch.
func answerJSONPatches(c *fake.Clientset, before func(patch int, n *corev1.Node)) {
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	var patches atomic.Int32
	c.PrependReactor("patch", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		pa := action.(clienttesting.PatchAction)
		if pa.GetPatchType() != types.JSONPatchType || pa.GetSubresource() != "" {
			return false, nil, nil
		}
		obj, err := c.Tracker().Get(nodes, "", pa.GetName())
		if err != nil {
			return true, nil, err
		}
		node := obj.(*corev1.Node).DeepCopy()
		if before != nil {
			before(int(patches.Add(1)), node)
			bumpVersion(node)
			if err := c.Tracker().Update(nodes, node, ""); err != nil {
				return true, nil, err
			}
		}
		doc, err := json.Marshal(node)
		if err != nil {
			return true, nil, err
		}
		patch, err := jsonpatch.DecodePatch(pa.GetPatch())
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		out, err := patch.Apply(doc)
		if err != nil {
			return true, nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		var patched corev1.Node
		if err := json.Unmarshal(out, &patched); err != nil {
			return true, nil, err
		}
		bumpVersion(&patched)
		if err := c.Tracker().Update(nodes, &patched, ""); err != nil {
			return true, nil, err
		}
		return true, &patched, nil
	})
}

// bumpVersion moves n's resourceVersion on, as the apiserver does on a
// write.
func bumpVersion(n *corev1.Node) {
	v, _ := strconv.Atoi(n.ResourceVersion)
	n.ResourceVersion = strconv.Itoa(v + 1)
}

// nodeCalls lists the controller's Node patches (with their type) and reads.
func nodeCalls(c *fake.Clientset) string {
	var calls []string
	for _, a := range c.Actions() {
		if a.GetResource().Resource != "nodes" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.PatchAction:
			calls = append(calls, fmt.Sprintf("patch %s (%s)", a.GetName(), a.GetPatchType()))
		case clienttesting.GetAction:
			calls = append(calls, "get "+a.GetName())
		}
	}
	return strings.Join(calls, ", ")
}

// TestGuardedAssignment: a write between the decision and its patch fails
// the assignment only when it moved what the decision read. A kubelet's
// status report does not, and the patch applies as sent; a label the
// rollouts do not select on fails the guard, and the assignment is sent
// again at once over the Node as it is; an agent's report fails it, and
// the rollout is decided again.
func TestGuardedAssignment(t *testing.T) {
	for _, tc := range []struct {
		name string
		// moved is the write that reached the apiserver just before the
		// canary's first patch.
		moved                  func(n *corev1.Node)
		wantCalls              string
		wantRetried, wantAgain float64
	}{
		{"a status report", func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(1000, 0))
		}, "patch a (application/json-patch+json)", 0, 0},
		{"a label of no selector", func(n *corev1.Node) { n.Labels["zone"] = "z" },
			"patch a (application/json-patch+json), patch a (application/json-patch+json)", 1, 0},
		{"an agent's report", func(n *corev1.Node) { n.Status.Conditions[1].Message = "reported again" },
			"patch a (application/json-patch+json)", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blue := map[string]string{"pool": "blue"}
			var kube *fake.Clientset
			setup := func(c *fake.Clientset, _ *fakeRollouts) {
				kube = c
				answerJSONPatches(c, func(patch int, n *corev1.Node) {
					if patch == 1 && n.Name == "a" {
						tc.moved(n)
					}
				})
			}
			h := start(t, newRollout("r"), setup, guardableNode("a", blue), guardableNode("b", blue))
			h.eventually(t, "the canary assigned", func() (bool, string) {
				got := h.assigned()
				return got["a"] == "kubelet-configs/v2", fmt.Sprintf("assigned %v", got)
			})
			// The Node as it is now comes from the cache when the watch
			// has delivered the write, else from a read.
			if got := strings.ReplaceAll(nodeCalls(kube), "get a, ", ""); !strings.HasPrefix(got, tc.wantCalls) {
				t.Errorf("Node calls %q, want them to start %q", got, tc.wantCalls)
			}
			retried := testutil.ToFloat64(h.ctrl.metrics.changes.WithLabelValues("r", "assign", resultRetried))
			again := testutil.ToFloat64(h.ctrl.metrics.changes.WithLabelValues("r", "assign", resultConflict))
			// A decision made again before the watch delivered the write
			// finds it moved by the time it patches: left once more,
			// without a round trip.
			if retried != tc.wantRetried || (again == 0) != (tc.wantAgain == 0) {
				t.Errorf("patches sent again at once %v and left to the next decision %v, want %v and %v", retried, again, tc.wantRetried, tc.wantAgain)
			}
		})
	}
}

// TestGuardThatNeverMatchesFallsBackToTheResourceVersion: a guard that
// fails on the very Node it was made from (an apiserver rendering a field
// this build does not know) is not tried again; the change goes with the
// Node's resourceVersion instead, and applies.
func TestGuardThatNeverMatchesFallsBackToTheResourceVersion(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	var kube *fake.Clientset
	setup := func(c *fake.Clientset, _ *fakeRollouts) {
		kube = c
		c.PrependReactor("patch", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.(clienttesting.PatchAction).GetPatchType() == types.JSONPatchType {
				return true, nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "testing value /metadata/labels failed: test failed", 0, false)
			}
			return false, nil, nil
		})
	}
	h := start(t, newRollout("r"), setup, guardableNode("a", blue), guardableNode("b", blue))
	h.eventually(t, "the canary assigned", func() (bool, string) {
		got := h.assigned()
		return got["a"] == "kubelet-configs/v2", fmt.Sprintf("assigned %v", got)
	})
	want := "patch a (application/json-patch+json), get a, patch a (application/merge-patch+json)"
	if got := nodeCalls(kube); !strings.HasPrefix(got, want) {
		t.Errorf("Node calls %q, want them to start %q", got, want)
	}
}
