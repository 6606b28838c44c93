package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
)

// writeTimeout bounds one write to the apiserver.
const writeTimeout = 15 * time.Second

// Reporter writes Reports to the Node and Events about it. It keeps only the
// latest Report: a status that could not be written is replaced, not queued.
type Reporter struct {
	client   kubeclient.Interface
	nodeName string
	// cachedNode returns the Node as last seen, to skip writes that change
	// nothing; it may return nil.
	cachedNode func() *corev1.Node
	recorder   record.EventRecorder
	nodeRef    *corev1.ObjectReference
	now        func() time.Time
	queue      workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	latest *Report
}

const reportKey = "status"

// NewReporter returns a reporter for nodeName. recorder may be nil (events
// are then only logged).
func NewReporter(client kubeclient.Interface, nodeName string, cachedNode func() *corev1.Node, recorder record.EventRecorder) *Reporter {
	return &Reporter{
		client:     client,
		nodeName:   nodeName,
		cachedNode: cachedNode,
		recorder:   recorder,
		// Events about a Node name it the way the kubelet does: the UID is
		// the node's name, and the Event lands in the default namespace.
		nodeRef: &corev1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)},
		now:     time.Now,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeguard-agent-status"}),
	}
}

// Set makes r the report to write.
func (r *Reporter) Set(report Report) {
	r.mu.Lock()
	r.latest = &report
	r.mu.Unlock()
	r.queue.Add(reportKey)
}

// Event records an Event about the Node.
func (r *Reporter) Event(ctx context.Context, ev Event) {
	ev.Log(ctx)
	if r != nil && r.recorder != nil {
		r.recorder.Event(r.nodeRef, ev.Type, ev.Reason, ev.Message)
	}
}

// Run writes reports until ctx ends, retrying failures with backoff.
func (r *Reporter) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for {
		key, quit := r.queue.Get()
		if quit {
			return
		}
		r.mu.Lock()
		report := r.latest
		r.mu.Unlock()
		var err error
		if report != nil {
			err = r.Write(ctx, *report)
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Writing the config status to the Node failed; retrying")
			r.queue.AddRateLimited(key)
		} else {
			r.queue.Forget(key)
		}
		r.queue.Done(key)
	}
}

// retriable errors are worth another immediate try; anything else waits
// for the queue's backoff.
func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err)
}

// Write brings the Node's annotation and condition in line with report,
// writing only what differs from the cached Node. Both go in one strategic
// merge patch of nodes/status (the Node's status subresource keeps its
// metadata; conditions merge by type, so the kubelet's own are left
// alone): a report is then one write and one watch event, and a reader
// never sees the annotation of one report beside the condition of the one
// before. A rollout frees a Node's slot only once both say it passed.
func (r *Reporter) Write(ctx context.Context, report Report) error {
	node := r.cachedNode()
	encoded, err := json.Marshal(report.Status)
	if err != nil {
		return fmt.Errorf("encoding the config status: %w", err)
	}
	annotation := string(encoded)
	body := map[string]any{}
	var what []string
	if node == nil || node.Annotations[contract.ConfigStatusAnnotation] != annotation {
		body["metadata"] = map[string]any{"annotations": map[string]string{contract.ConfigStatusAnnotation: annotation}}
		what = append(what, "annotation "+contract.ConfigStatusAnnotation)
	}
	if current := findCondition(node); !conditionMatches(current, report.Condition) {
		body["status"] = map[string]any{"conditions": []corev1.NodeCondition{r.condition(current, report.Condition)}}
		what = append(what, "condition "+contract.ConditionKubeletConfigReady)
	}
	if len(body) == 0 {
		return nil
	}
	patched, err := r.patch(ctx, strings.Join(what, " and "), types.StrategicMergePatchType, body, "status")
	if err != nil {
		return err
	}
	if _, ok := body["metadata"]; ok && patched.Annotations[contract.ConfigStatusAnnotation] != annotation {
		// An apiserver whose nodes/status drops metadata, as the status
		// subresource of a custom resource does, kept only the condition:
		// the annotation goes to the Node itself.
		_, err = r.patch(ctx, "annotation "+contract.ConfigStatusAnnotation, types.MergePatchType,
			map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.ConfigStatusAnnotation: annotation}}})
	}
	return err
}

// condition is the KubeletConfigReady condition to write for want, over
// current (nil when the Node has none): its heartbeat now, its transition
// time kept unless the status changes.
func (r *Reporter) condition(current *corev1.NodeCondition, want Condition) corev1.NodeCondition {
	now := metav1.NewTime(r.now())
	transition := now
	if current != nil && current.Status == want.Status {
		transition = current.LastTransitionTime
	}
	return corev1.NodeCondition{
		Type:               contract.ConditionKubeletConfigReady,
		Status:             want.Status,
		Reason:             want.Reason,
		Message:            want.Message,
		LastHeartbeatTime:  now,
		LastTransitionTime: transition,
	}
}

// patch patches the Node (or its subresource) with body, what naming what
// it writes, and returns the Node as patched.
func (r *Reporter) patch(ctx context.Context, what string, pt types.PatchType, body any, subresources ...string) (*corev1.Node, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	var patched *corev1.Node
	err = retry.OnError(retry.DefaultBackoff, retriable, func() error {
		ctx, cancel := context.WithTimeout(ctx, writeTimeout)
		defer cancel()
		patched, err = r.client.Nodes().Patch(ctx, r.nodeName, pt, data, metav1.PatchOptions{FieldManager: "nodeguard-agent"}, subresources...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("patching %s on Node %s: %w", what, r.nodeName, err)
	}
	return patched, nil
}

func findCondition(node *corev1.Node) *corev1.NodeCondition {
	if node == nil {
		return nil
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == contract.ConditionKubeletConfigReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

func conditionMatches(current *corev1.NodeCondition, want Condition) bool {
	return current != nil && current.Status == want.Status && current.Reason == want.Reason && current.Message == want.Message
}
