package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardfake "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/fake"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// fakeRollouts is the generated fake clientset, its status writes held
// while statusGate is set and logged. The log, writes, also gets the
// harness's Node patches, in the order they were made.
type fakeRollouts struct {
	*nodeguardfake.Clientset
	writes writeLog
	// statusGate, when set, holds every status write until it is closed
	// or the write's context ends. It wraps the call rather than reacting
	// to it: a reactor that blocks holds the whole fake clientset.
	statusGate chan struct{}
}

type writeLog struct {
	mu      sync.Mutex
	entries []string
}

func (l *writeLog) add(entry string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, entry)
}

func (l *writeLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

func newFakeRollouts(objs ...*v1alpha1.KubeletConfigRollout) *fakeRollouts {
	var tracked []runtime.Object
	for _, o := range objs {
		tracked = append(tracked, o)
	}
	return &fakeRollouts{Clientset: nodeguardfake.NewSimpleClientset(tracked...)}
}

func (f *fakeRollouts) NodeguardV1alpha1() nodeguardclient.NodeguardV1alpha1Interface {
	return gatedV1alpha1{f.Clientset.NodeguardV1alpha1(), f}
}

// Get reads a rollout as stored.
func (f *fakeRollouts) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1alpha1.KubeletConfigRollout, error) {
	return f.Clientset.NodeguardV1alpha1().KubeletConfigRollouts().Get(ctx, name, opts)
}

type gatedV1alpha1 struct {
	nodeguardclient.NodeguardV1alpha1Interface
	f *fakeRollouts
}

func (g gatedV1alpha1) KubeletConfigRollouts() nodeguardclient.KubeletConfigRolloutInterface {
	return gatedRollouts{g.NodeguardV1alpha1Interface.KubeletConfigRollouts(), g.f}
}

type gatedRollouts struct {
	nodeguardclient.KubeletConfigRolloutInterface
	f *fakeRollouts
}

func (g gatedRollouts) UpdateStatus(ctx context.Context, r *v1alpha1.KubeletConfigRollout, opts metav1.UpdateOptions) (*v1alpha1.KubeletConfigRollout, error) {
	if g.f.statusGate != nil {
		select {
		case <-g.f.statusGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	updated, err := g.KubeletConfigRolloutInterface.UpdateStatus(ctx, r, opts)
	if err == nil {
		g.f.writes.add("status")
	}
	return updated, err
}

func readyNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: contract.ConditionKubeletConfigReady, Status: corev1.ConditionTrue, Reason: "LocalConfig"},
		}},
	}
}

// expectationsTimeout is the harness controller's.
const expectationsTimeout = 300 * time.Millisecond

// statusInterval is the harness controller's Config.StatusInterval.
const statusInterval = 100 * time.Millisecond

type harness struct {
	kube     *fake.Clientset
	rollouts *fakeRollouts
	ctrl     *Controller
}

// start runs the controller over the nodes; setup, when set, adds reactors
// to the clientset, or a gate to the rollouts, before anything uses them.
func start(t *testing.T, r *v1alpha1.KubeletConfigRollout, setup func(*fake.Clientset, *fakeRollouts), nodes ...*corev1.Node) *harness {
	t.Helper()
	return startWrapped(t, r, setup, nil, nodes...)
}

// startWrapped is start with the controller's client wrapped, when wrap is
// set: a reactor that blocks holds the whole fake clientset, a wrapper only
// its own call.
func startWrapped(t *testing.T, r *v1alpha1.KubeletConfigRollout, setup func(*fake.Clientset, *fakeRollouts), wrap func(kubernetes.Interface) kubernetes.Interface, nodes ...*corev1.Node) *harness {
	t.Helper()
	eligible := map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}
	return startAll(t, r, setup, wrap, []*metav1.PartialObjectMetadata{configMapMeta("v2", eligible)}, nodes...)
}

// startWithConfigMaps is start with these ConfigMaps instead of the
// eligible kubelet-configs/v2.
func startWithConfigMaps(t *testing.T, r *v1alpha1.KubeletConfigRollout, cms []*metav1.PartialObjectMetadata, nodes ...*corev1.Node) *harness {
	t.Helper()
	return startAll(t, r, nil, nil, cms, nodes...)
}

// configMapMeta is the metadata of the ConfigMap kubelet-configs/name, at
// uid-<name> and resourceVersion 7.
func configMapMeta(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kubelet-configs", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7",
			Labels: labels},
	}
}

func startAll(t *testing.T, r *v1alpha1.KubeletConfigRollout, setup func(*fake.Clientset, *fakeRollouts), wrap func(kubernetes.Interface) kubernetes.Interface, cms []*metav1.PartialObjectMetadata, nodes ...*corev1.Node) *harness {
	t.Helper()
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, n)
	}
	kube := fake.NewClientset(objs...)
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var mdObjs []runtime.Object
	for _, cm := range cms {
		mdObjs = append(mdObjs, cm)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, mdObjs...)
	rollouts := newFakeRollouts(r)
	if setup != nil {
		setup(kube, rollouts)
	}
	kube.PrependReactor("patch", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		rollouts.writes.add("patch " + action.(clienttesting.PatchAction).GetName())
		return false, nil, nil
	})
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	// client-go's fake clientset keeps no resourceVersions, so the cache
	// never shows a patched Node at a new one: the expectations hold every
	// decision after a write until they time out, which is short here.
	var client kubernetes.Interface = kube
	if wrap != nil {
		client = wrap(kube)
	}
	// The tests say when each Node's agent reports its trial over; the
	// period the controller holds an early report to is pkg/rollout's to
	// test (TestAnEarlyReportIsNotCountedUpdated), so it is as short as
	// nodeguard.dev/trial-ends can say here.
	ctrl, err := New(Config{Kube: client, Metadata: md, Rollouts: rollouts, Metrics: metrics, ExpectationsTimeout: expectationsTimeout, StatusInterval: statusInterval,
		TrialPeriod: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ctrl.Run(ctx, 2)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &harness{kube: kube, rollouts: rollouts, ctrl: ctrl}
}

func newRollout(name string) *v1alpha1.KubeletConfigRollout {
	return &v1alpha1.KubeletConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.KubeletConfigRolloutSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "blue"}},
			ConfigMapRef: contract.ConfigMapRef{Namespace: "kubelet-configs", Name: "v2"},
		},
	}
}

func (h *harness) eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var detail string
	for time.Now().Before(deadline) {
		var ok bool
		if ok, detail = cond(); ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %s", what, detail)
}

func (h *harness) assigned() map[string]string {
	out := map[string]string{}
	list, _ := h.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	for _, n := range list.Items {
		if v, ok := n.Annotations[contract.ConfigSourceAnnotation]; ok {
			out[n.Name] = v
		}
	}
	return out
}

// TestCanaryAloneAndStatusFirst: the first decision assigns only the
// canary, with the bookkeeping, and writes the status, naming it, before
// the patch; with the canary in trial nothing else is assigned however
// often the rollout is synced.
func TestCanaryAloneAndStatusFirst(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	h := start(t, newRollout("r"), nil, readyNode("a", blue), readyNode("b", blue), readyNode("c", blue), readyNode("other", nil))
	h.eventually(t, "the canary assigned", func() (bool, string) {
		got := h.assigned()
		return len(got) == 1 && got["a"] == "kubelet-configs/v2", fmt.Sprint(got)
	})
	node, err := h.kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Annotations[contract.RolloutAnnotation] != "r" {
		t.Errorf("bookkeeping: %v", node.Annotations)
	}
	var r *v1alpha1.KubeletConfigRollout
	h.eventually(t, "the status written", func() (bool, string) {
		r, err = h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
		return err == nil && r.Status.Target != nil, fmt.Sprint(err)
	})
	if c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Reason != v1alpha1.ReasonCanary {
		t.Errorf("Progressing %+v, want Canary", c)
	}
	if r.Status.Selected != 3 || r.Status.Target == nil || r.Status.Target.UID != "uid-v2" {
		t.Errorf("status %+v", r.Status)
	}
	if got := h.rollouts.writes.list(); len(got) < 2 || got[0] != "status" || slices.Index(got, "patch a") < 1 {
		t.Errorf("writes %v, want the status, then the canary's patch", got)
	}
	m := h.ctrl.metrics
	// Once the status says the canary is waited on, nothing changes: the
	// syncs below read the rollout as the controller's last status write
	// left it, whether the cache shows the write yet or not, and write
	// nothing again.
	h.eventually(t, "the status waiting on the canary", func() (bool, string) {
		r, err = h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionProgressing)
		return err == nil && c != nil && strings.Contains(c.Message, "waiting on a"), fmt.Sprint(err, c)
	})
	time.Sleep(2 * statusInterval)
	before := len(h.rollouts.writes.list())
	for range 5 {
		h.ctrl.queue.Add("r")
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * statusInterval)
	if got := h.rollouts.writes.list(); slices.Index(got[before:], "status") >= 0 {
		t.Errorf("writes %v, want no status written again after the %d first", got, before)
	}
	time.Sleep(2 * expectationsTimeout)
	h.ctrl.queue.Add("r")
	time.Sleep(100 * time.Millisecond)
	if got := h.assigned(); len(got) != 1 {
		t.Errorf("assigned beside the canary in trial: %v", got)
	}
	if got := testutil.ToFloat64(m.nodes.WithLabelValues("r", string(rollout.StateInTrial))); got != 1 {
		t.Errorf("nodeguard_rollout_nodes InTrial %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.nodes.WithLabelValues("r", string(rollout.StatePending))); got != 2 {
		t.Errorf("nodeguard_rollout_nodes Pending %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.changes.WithLabelValues("r", "assign", resultOK)); got != 1 {
		t.Errorf("assignments counted %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.failed.WithLabelValues("r")); got != 0 {
		t.Errorf("nodeguard_rollout_failed %v for a rollout in its canary, want 0", got)
	}
	if got := testutil.ToFloat64(m.queue.adds.WithLabelValues("kubeletconfigrollout")); got < 1 {
		t.Errorf("workqueue_adds_total %v", got)
	}
}

// TestRevertsFollowTheStatus: a decision that reverts writes the status,
// Failed naming the Node, before it re-points any Node.
func TestRevertsFollowTheStatus(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	target := contract.ConfigMapVersion{Namespace: "kubelet-configs", Name: "v2", UID: "uid-v2", ResourceVersion: "7"}
	moved := func(name string) *corev1.Node {
		n := readyNode(name, blue)
		n.Annotations = map[string]string{
			contract.ConfigSourceAnnotation:         "kubelet-configs/v2",
			contract.RolloutAnnotation:              "r",
			contract.PreviousConfigSourceAnnotation: "",
		}
		return n
	}
	failed := moved("a")
	report, err := json.Marshal(contract.ConfigStatus{Assigned: &target, Error: "the kubelet did not come back"})
	if err != nil {
		t.Fatal(err)
	}
	failed.Annotations[contract.ConfigStatusAnnotation] = string(report)
	failed.Status.Conditions[1] = corev1.NodeCondition{Type: contract.ConditionKubeletConfigReady, Status: corev1.ConditionFalse, Reason: contract.ReasonRolledBack}
	r := newRollout("r")
	r.Spec.OnFailure = v1alpha1.FailureRevert
	h := start(t, r, nil, failed, moved("b"), readyNode("c", blue))
	h.eventually(t, "both moved Nodes reverted", func() (bool, string) {
		got := h.assigned()
		return got["a"] == "" && got["b"] == "", fmt.Sprint(got)
	})
	got := h.rollouts.writes.list()
	if len(got) < 3 || got[0] != "status" || !strings.HasPrefix(got[1], "patch ") {
		t.Fatalf("writes %v, want the status, then the reverts", got)
	}
	stored, err := h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(stored.Status.Conditions, v1alpha1.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "Node a") {
		t.Errorf("Failed %+v, want True naming Node a", c)
	}
	if got := testutil.ToFloat64(h.ctrl.metrics.failed.WithLabelValues("r")); got != 1 {
		t.Errorf("nodeguard_rollout_failed %v for a failed rollout, want 1", got)
	}
	if got := h.assigned(); got["c"] != "" {
		t.Errorf("Node c assigned by a failed rollout: %v", got)
	}
}

// TestRefusedAssignmentFailsTheRollout: an admission denial of the canary's
// patch is fed back as a refusal and fails the rollout naming the Node,
// and nothing else is assigned.
func TestRefusedAssignmentFailsTheRollout(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	refuse := func(kube *fake.Clientset, _ *fakeRollouts) {
		kube.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "a",
				errors.New(`admission webhook "nodes.nodeguard.dev" denied the request: nodeguard rule 5: feature gate NoSuchGate is unknown`))
		})
	}
	h := start(t, newRollout("r"), refuse, readyNode("a", blue), readyNode("b", blue))
	h.eventually(t, "Failed=True AssignmentRefused", func() (bool, string) {
		r, err := h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionFailed)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonAssignmentRefused, fmt.Sprintf("%+v", c)
	})
	if got := h.assigned(); len(got) != 0 {
		t.Errorf("assigned: %v", got)
	}
}

// TestConflictsAreNoFailure: a Node patch that meets a newer Node (its
// kubelet wrote in between) is decided again soon, however many times in a
// row that happens. As a sync error it would go through the queue's
// exponential backoff: after a dozen conflicts in a row, seconds per retry,
// past this test's deadline.
func TestConflictsAreNoFailure(t *testing.T) {
	const conflicts = 12
	blue := map[string]string{"pool": "blue"}
	var patches atomic.Int32
	conflict := func(kube *fake.Clientset, _ *fakeRollouts) {
		kube.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			if patches.Add(1) <= conflicts {
				return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "a", errors.New("the object has been modified"))
			}
			return false, nil, nil
		})
	}
	h := start(t, newRollout("r"), conflict, readyNode("a", blue), readyNode("b", blue))
	h.eventually(t, "the canary assigned after the conflicts", func() (bool, string) {
		got := h.assigned()
		return got["a"] == "kubelet-configs/v2", fmt.Sprintf("assigned %v after %d patches", got, patches.Load())
	})
}

func TestIsAdmissionRefusal(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewForbidden(gr, "a", errors.New(`admission webhook "x" denied the request: no`)), true},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "a", nil), true},
		{apierrors.NewForbidden(gr, "a", errors.New(`User "system:serviceaccount:nodeguard:x" cannot patch resource "nodes"`)), false},
		{apierrors.NewConflict(gr, "a", errors.New("modified")), false},
		{errors.New("connection refused"), false},
	} {
		if got := isAdmissionRefusal(tc.err); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestNewestReadsTheLastWriteUntilTheCacheShowsIt: a decision reads the
// rollout as the controller's last status write left it while the cache
// holds an older version, the cache once it shows the write or a later
// version, and the cache again past the timeout.
func TestNewestReadsTheLastWriteUntilTheCacheShowsIt(t *testing.T) {
	now := time.Unix(1000, 0)
	st := newRolloutState(time.Minute, 16)
	version := func(rv string) *v1alpha1.KubeletConfigRollout {
		return &v1alpha1.KubeletConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: "r", ResourceVersion: rv}}
	}
	cached := version("5")
	if got := st.newest(cached, now); got != cached {
		t.Fatal("with nothing written, not the cached rollout")
	}
	written := version("6")
	st.wrote(written, write{produced: "6", over: []string{"5"}}, now)
	if got := st.newest(cached, now.Add(30*time.Second)); got != written {
		t.Fatalf("before the cache moved: rv %s, want the write's", got.ResourceVersion)
	}
	if later := version("7"); st.newest(later, now) != later {
		t.Fatal("a cache past the write is not read")
	}
	if st.newest(cached, now) != cached {
		t.Fatal("a write the cache showed is read again")
	}
	st.wrote(version("8"), write{produced: "8", over: []string{"7"}}, now)
	if seven := version("7"); st.newest(seven, now.Add(2*time.Minute)) != seven {
		t.Fatal("the write is still read past the timeout")
	}
}

// TestWriteShownBy: a write is shown by its own resourceVersion and any
// later one, and not by one older, even one newer than the decision's (the
// heartbeat a conflict re-read, which the cache may not show yet); where
// resourceVersions do not compare, by any but those it was made over.
func TestWriteShownBy(t *testing.T) {
	retried := write{produced: "12", over: []string{"10", "11"}}
	opaque := write{produced: "c", over: []string{"a", "b"}}
	for _, tc := range []struct {
		w      write
		cached string
		want   bool
	}{
		{retried, "10", false},
		{retried, "11", false},
		{retried, "12", true},
		{retried, "13", true},
		{retried, "100", true},
		{write{produced: "100", over: []string{"99"}}, "99", false},
		{opaque, "a", false},
		{opaque, "b", false},
		{opaque, "c", true},
		{opaque, "d", true},
	} {
		if got := tc.w.shownBy(tc.cached); got != tc.want {
			t.Errorf("write %+v shown by %q: %v, want %v", tc.w, tc.cached, got, tc.want)
		}
	}
}
