package drain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
)

// Client is what a drain needs of the API; kubeclient.Interface is one.
type Client interface {
	Nodes() kubeclient.NodeClient
	Pods(namespace string) kubeclient.PodClient
}

// Drainer drains one Node with that Node's credentials.
type Drainer struct {
	client   Client
	nodeName string
}

// New returns a Drainer for nodeName.
func New(client Client, nodeName string) (*Drainer, error) {
	if client == nil || nodeName == "" {
		return nil, errors.New("drain: a client and a node name are required")
	}
	return &Drainer{client: client, nodeName: nodeName}, nil
}

// CordonedByAgent reports whether the Node carries the agent's cordon.
func CordonedByAgent(node *corev1.Node) bool {
	_, ok := node.Annotations[contract.CordonedAnnotation]
	return ok
}

// Cordon makes the Node unschedulable and marks the cordon as the agent's,
// in one patch conditioned on the resourceVersion read: if an administrator
// cordoned the Node since, the patch conflicts instead of claiming their
// cordon. On a conflict (most often the agent's own status write, which
// moved the resourceVersion after node was read) the Node is read again
// and the cordon retried, as client-go's retry.RetryOnConflict does. A
// Node already unschedulable is left as it is (its cordon is not the
// agent's to lift). why is the mark's value, for operators.
func (d *Drainer) Cordon(ctx context.Context, node *corev1.Node, why string) (*corev1.Node, error) {
	current := node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current.Spec.Unschedulable {
			return nil
		}
		patch := map[string]any{
			"metadata": map[string]any{
				"resourceVersion": current.ResourceVersion,
				"annotations":     map[string]any{contract.CordonedAnnotation: why},
			},
			"spec": map[string]any{"unschedulable": true},
		}
		updated, err := d.patchNode(ctx, patch)
		if err == nil {
			current = updated
			return nil
		}
		if apierrors.IsConflict(err) {
			fresh, getErr := d.getNode(ctx)
			if getErr != nil {
				return getErr
			}
			current = fresh
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cordoning Node %s: %w", d.nodeName, err)
	}
	return current, nil
}

// getNode reads the Node afresh, through the named list a node may make.
func (d *Drainer) getNode(ctx context.Context) (*corev1.Node, error) {
	list, err := d.client.Nodes().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", d.nodeName).String()})
	if err != nil {
		return nil, fmt.Errorf("reading Node %s: %w", d.nodeName, err)
	}
	if len(list.Items) != 1 {
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), d.nodeName)
	}
	return &list.Items[0], nil
}

// Uncordon lifts the agent's cordon: only a Node carrying the mark is made
// schedulable, and the mark goes in the same patch.
func (d *Drainer) Uncordon(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	if !CordonedByAgent(node) {
		return node, nil
	}
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{contract.CordonedAnnotation: nil}},
		"spec":     map[string]any{"unschedulable": false},
	}
	updated, err := d.patchNode(ctx, patch)
	if err != nil {
		return nil, fmt.Errorf("uncordoning Node %s: %w", d.nodeName, err)
	}
	return updated, nil
}

func (d *Drainer) patchNode(ctx context.Context, patch map[string]any) (*corev1.Node, error) {
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	return d.client.Nodes().Patch(ctx, d.nodeName, types.MergePatchType, data, metav1.PatchOptions{FieldManager: "nodeguard-agent"})
}

// ListPods lists the pods bound to the Node.
func (d *Drainer) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	return kubeclient.ListNodePods(ctx, d.client.Pods(metav1.NamespaceAll), d.nodeName)
}

// Pending is a pod the drain still waits for.
type Pending struct {
	Namespace, Name string
	// Blocked is true when its eviction was refused: a
	// PodDisruptionBudget allows no disruption now (the API's 429), or
	// the request failed. False means the pod is terminating.
	Blocked bool
	// Why says it in words: the API's message, or "terminating".
	Why string
}

// String is "namespace/name".
func (p Pending) String() string { return p.Namespace + "/" + p.Name }

// Progress is where a drain stands after one Evict.
type Progress struct {
	// Pending are the pods that must leave and are still bound, sorted.
	Pending []Pending
}

// Done reports whether no pod that must leave is left.
func (p Progress) Done() bool { return len(p.Pending) == 0 }

// Names lists the pending pods as "namespace/name".
func (p Progress) Names() []string {
	names := make([]string, len(p.Pending))
	for i, pod := range p.Pending {
		names[i] = pod.String()
	}
	return names
}

// Summary says in one line what the drain waits for.
func (p Progress) Summary() string {
	var parts []string
	for _, pod := range p.Pending {
		parts = append(parts, pod.String()+" ("+pod.Why+")")
	}
	return strings.Join(parts, ", ")
}

// Evict takes one step of the drain over pods, the pods bound to the Node:
// it asks the Eviction API to evict every pod that must leave and is not
// already terminating, and reports what is still pending. A budget that
// allows no disruption refuses with 429; the pod is reported blocked and
// asked again at the next step, as `kubectl drain` retries. A pod
// already gone counts as gone.
func (d *Drainer) Evict(ctx context.Context, pods []*corev1.Pod) Progress {
	var progress Progress
	for _, pod := range pods {
		if leave, _ := MustLeave(pod); !leave {
			continue
		}
		pending := Pending{Namespace: pod.Namespace, Name: pod.Name}
		if pod.DeletionTimestamp != nil {
			pending.Why = "terminating"
			progress.Pending = append(progress.Pending, pending)
			continue
		}
		err := d.client.Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
			// Evict exactly the pod that was listed: a new pod of the
			// same name is a later decision's to make.
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
		})
		switch {
		case err == nil:
			pending.Why = "terminating"
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsConflict(err):
			// The UID precondition failed: the pod listed is gone and
			// another took its name.
			continue
		case apierrors.IsTooManyRequests(err):
			pending.Blocked, pending.Why = true, "eviction refused: "+apiMessage(err)
		default:
			pending.Blocked, pending.Why = true, "eviction failed: "+err.Error()
		}
		progress.Pending = append(progress.Pending, pending)
	}
	sort.Slice(progress.Pending, func(i, j int) bool { return progress.Pending[i].String() < progress.Pending[j].String() })
	return progress
}

// apiMessage is the Status message of an API error, which for a refused
// eviction names the budget ("Cannot evict pod as it would violate the
// pod's disruption budget.").
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}
