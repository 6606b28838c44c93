package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/drain"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/status"
)

// agentClient lends a simulated kubelet's node client to the agent's own
// status.Reporter, so that the annotation and the condition are written
// by the agent's code, with the node's credentials, over the node's
// connection.
type agentClient struct{ a *agent }

func (c agentClient) Nodes() kubeclient.NodeClient {
	return timedNodes{NodeClient: c.a.k.core.Nodes(), a: c.a}
}
func (c agentClient) ConfigMaps(namespace string) kubeclient.ConfigMapClient {
	return c.a.k.core.ConfigMaps(namespace)
}
func (c agentClient) Events(namespace string) kubeclient.EventClient {
	return c.a.k.core.Events(namespace)
}
func (c agentClient) Pods(namespace string) kubeclient.PodClient {
	return c.a.k.core.Pods(namespace)
}

// timedNodes notes when the agent last sent a patch of its Node, so that
// the harness can time that write to its arrival in its own Node watch.
type timedNodes struct {
	kubeclient.NodeClient
	a *agent
}

func (t timedNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	t.a.mu.Lock()
	t.a.lastPatch = time.Now()
	t.a.mu.Unlock()
	return t.NodeClient.Patch(ctx, name, pt, data, opts, subresources...)
}

// agent simulates cmd/agent on one node: it watches its own Node, and on a
// change of nodeguard.dev/config-source reads the assigned ConfigMap by
// name, reports it assigned and active on trial, and after trial reports
// it last-known-good, with the condition reasons and messages the real
// agent uses. An assignment that says nodeguard.dev/drain: Always is
// drained first, as the real agent's reconciler drains it (drain.go): the
// cordon, then the phase Draining for drainTime, then the trial; the cordon
// is lifted when the trial passes, before the report that says so. It
// never fails a trial.
type agent struct {
	k         *kubelet
	trial     time.Duration
	drainTime time.Duration
	reporter  *status.Reporter
	drainer   *drain.Drainer

	mu   sync.Mutex
	node *corev1.Node
	// lastPatch is when the agent last sent a patch of its Node; updatedSent
	// is lastPatch once its report of a passed trial is on the Node: the
	// write that makes the Node Updated.
	lastPatch, updatedSent time.Time
	// reported is closed once the initial (local) status is on the Node.
	reported chan struct{}
	// readRetries counts the reads of an assigned ConfigMap retried.
	readRetries atomic.Int64
}

func newAgent(k *kubelet, trial, drainTime time.Duration) (*agent, error) {
	a := &agent{k: k, trial: trial, drainTime: drainTime, reported: make(chan struct{})}
	a.reporter = status.NewReporter(agentClient{a}, k.name, a.cachedNode, nil)
	d, err := drain.New(agentClient{a}, k.name)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", k.name, err)
	}
	a.drainer = d
	return a, nil
}

func (a *agent) cachedNode() *corev1.Node {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.node
}

// describe names a configuration as the agent's messages do.
func describe(ref *contract.ConfigMapVersion) string {
	if ref == nil {
		return "the local configuration"
	}
	return fmt.Sprintf("ConfigMap %s/%s (uid %s, resourceVersion %s)", ref.Namespace, ref.Name, ref.UID, ref.ResourceVersion)
}

// change is the assignment an agent is applying: drained (cordoned is the
// Node as the agent's cordon left it) and then on trial.
type change struct {
	target   *contract.ConfigMapVersion
	cordoned *corev1.Node
	drainEnd <-chan time.Time
	trialEnd <-chan time.Time
}

// run is the agent's loop until ctx ends.
func (a *agent) run(ctx context.Context) {
	var (
		handled = "\x00" // the config-source value last acted on; never a real one
		lkg     *contract.ConfigMapVersion
		ch      change
		events  <-chan watch.Event
		w       watch.Interface
		rv      string
	)
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	for ctx.Err() == nil {
		if w == nil {
			var err error
			w, err = a.k.core.Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + a.k.name, ResourceVersion: rv})
			if err != nil {
				pause(ctx)
				continue
			}
			events = w.ResultChan()
		}
		select {
		case <-ctx.Done():
			return
		case <-ch.drainEnd:
			ch.drainEnd = nil
			ch.trialEnd = a.startTrial(ctx, ch.target, lkg)
		case <-ch.trialEnd:
			if ch.cordoned != nil && !a.uncordon(ctx, ch.cordoned) {
				return
			}
			lkg, ch = ch.target, change{}
			a.report(ctx, status.Report{
				// As the real agent reports it once the kubelet's /configz
				// shows the configuration.
				Status: contract.ConfigStatus{Assigned: lkg, Active: lkg, LastKnownGood: lkg,
					Running: &contract.RunningConfig{State: contract.RunningMatches}},
				Condition: status.Condition{Status: corev1.ConditionTrue, Reason: contract.ReasonConfigActive,
					Message: describe(lkg) + " is active and passed its trial; the kubelet runs it (its /configz shows every field it sets)"},
			})
			a.mu.Lock()
			a.updatedSent = a.lastPatch
			a.mu.Unlock()
		case ev, ok := <-events:
			if !ok || ev.Type == watch.Error {
				w.Stop()
				w = nil
				if ev.Type == watch.Error {
					rv = ""
				}
				continue
			}
			node, isNode := ev.Object.(*corev1.Node)
			if !isNode {
				continue
			}
			rv = node.ResourceVersion
			a.mu.Lock()
			a.node = node
			a.mu.Unlock()
			source := node.Annotations[contract.ConfigSourceAnnotation]
			if source == handled {
				continue
			}
			// The harness assigns each Node once and never takes it back,
			// so a change under way is never left cordoned here.
			handled, ch = source, change{}
			ref, assigned, err := contract.ParseConfigSource(source)
			if err != nil || !assigned {
				// The harness never assigns garbage; anything unassigned is
				// the local configuration.
				lkg = nil
				a.report(ctx, status.Report{Condition: status.Condition{
					Status: corev1.ConditionTrue, Reason: contract.ReasonLocalConfig, Message: "No configuration is assigned; the node's local configuration is active",
				}})
				a.markReported()
				continue
			}
			target, ok := a.download(ctx, ref)
			if !ok {
				return
			}
			ch.target = target
			if node.Annotations[contract.DrainAnnotation] != contract.DrainAlways {
				ch.trialEnd = a.startTrial(ctx, target, lkg)
				continue
			}
			if ch.cordoned, ok = a.startDrain(ctx, node, target, lkg); !ok {
				return
			}
			ch.drainEnd = time.After(a.drainTime)
		}
	}
}

// startTrial reports target active and on trial, as the real agent does
// once the kubelet runs it, and returns when the trial ends.
func (a *agent) startTrial(ctx context.Context, target, lkg *contract.ConfigMapVersion) <-chan time.Time {
	started := time.Now().UTC()
	a.report(ctx, status.Report{
		Status: contract.ConfigStatus{Assigned: target, Active: target, LastKnownGood: lkg, Phase: contract.PhaseTrialInProgress},
		Condition: status.Condition{Status: corev1.ConditionFalse, Reason: contract.ReasonTrialInProgress, Message: fmt.Sprintf(
			"%s is active and on trial since %s for %v", describe(target), started.Format("2006-01-02T15:04:05Z"), a.trial)},
	})
	return time.After(a.trial)
}

// startDrain takes the real agent's first step of a drain (the
// reconciler's drainStep): the cordon with its mark, in one patch
// conditioned on the Node's resourceVersion (drain.Drainer.Cordon), the
// list of the pods bound to the Node (none here: the harness runs no
// pods, so drainTime stands for their evictions), then the phase Draining
// reported. It returns the Node as the cordon left it; false once ctx has
// ended.
func (a *agent) startDrain(ctx context.Context, node *corev1.Node, target, lkg *contract.ConfigMapVersion) (*corev1.Node, bool) {
	var cordoned *corev1.Node
	for {
		var err error
		if cordoned, err = a.drainer.Cordon(ctx, node, describe(target)); err == nil {
			break
		}
		if pause(ctx); ctx.Err() != nil {
			return nil, false
		}
		if fresh := a.cachedNode(); fresh != nil {
			node = fresh
		}
	}
	for {
		if _, err := a.drainer.ListPods(ctx); err == nil {
			break
		}
		if pause(ctx); ctx.Err() != nil {
			return nil, false
		}
	}
	why := contract.DrainAnnotation + " is " + contract.DrainAlways
	a.report(ctx, status.Report{
		Status: contract.ConfigStatus{Assigned: target, Active: lkg, LastKnownGood: lkg, Phase: contract.PhaseDraining},
		Condition: status.Condition{Status: corev1.ConditionFalse, Reason: contract.ReasonDraining, Message: fmt.Sprintf(
			"draining the Node to apply %s (%s): waiting on the simulated evictions (%v)", describe(target), why, a.drainTime)},
	})
	return cordoned, ctx.Err() == nil
}

// uncordon lifts the agent's cordon once the trial has passed, as the
// real agent's releaseCordon does before it reports the pass; false once
// ctx has ended.
func (a *agent) uncordon(ctx context.Context, cordoned *corev1.Node) bool {
	for {
		if _, err := a.drainer.Uncordon(ctx, cordoned); err == nil {
			return true
		}
		if pause(ctx); ctx.Err() != nil {
			return false
		}
	}
}

// updatedWriteSent is when the agent sent the write that made its Node
// Updated; zero before that.
func (a *agent) updatedWriteSent() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.updatedSent
}

func (a *agent) markReported() {
	select {
	case <-a.reported:
	default:
		close(a.reported)
	}
}

// download reads the assigned ConfigMap by name with the node's
// credentials (a named list, as the agent's informer starts), retrying
// while nodeguard's graph has not yet seen the assignment, after the
// backoff of client-go's reflector (readBackoff), as the agent's informer
// retries. Each retry is counted.
func (a *agent) download(ctx context.Context, ref contract.ConfigMapRef) (*contract.ConfigMapVersion, bool) {
	backoff := readBackoff
	for {
		list, err := a.k.core.ConfigMaps(ref.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ref.Name})
		if err == nil && len(list.Items) == 1 {
			cm := list.Items[0]
			return &contract.ConfigMapVersion{Namespace: cm.Namespace, Name: cm.Name, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}, true
		}
		a.readRetries.Add(1)
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(backoff.Step()):
		}
	}
}

// readBackoff is client-go's reflector's backoff after a failed list
// (0.8 s doubling to 30 s, each wait up to twice as long): the manifests'
// authorization configuration counts on it.
var readBackoff = wait.Backoff{Duration: 800 * time.Millisecond, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: 30 * time.Second}

// report writes the report with the agent's Reporter, retrying until it
// is on the Node.
func (a *agent) report(ctx context.Context, r status.Report) {
	for ctx.Err() == nil {
		if err := a.reporter.Write(ctx, r); err == nil {
			return
		}
		pause(ctx)
	}
}

// statusOf reads a Node's config-status annotation; ok is false when it is
// absent or does not parse.
func statusOf(node *corev1.Node) (contract.ConfigStatus, bool) {
	var s contract.ConfigStatus
	raw, found := node.Annotations[contract.ConfigStatusAnnotation]
	if !found || json.Unmarshal([]byte(raw), &s) != nil {
		return s, false
	}
	return s, true
}
