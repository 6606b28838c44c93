package rollout_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// waitTimeout bounds each wait: seconds on an idle machine, generous for a
// busy two-core one.
const waitTimeout = 2 * time.Minute

// configNamespace holds the tests' eligible ConfigMaps (manifests/base
// creates it).
const configNamespace = "kubelet-configs"

// rolloutSpec is what a test varies in a rollout.
type rolloutSpec struct {
	selector       metav1.LabelSelector
	configMap      string
	canary         int32
	maxUnavailable int
	paused         bool
	onFailure      v1alpha1.FailurePolicy
	drain          v1alpha1.DrainMode
	trial          *contract.TrialTerms
}

// pool selects the Nodes the administrator put in a pool: a label no node
// may write itself, so the webhook admits the rollout and no node joins it
// on its own.
func pool(name string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{contract.PoolLabel: name}}
}

// createRollout creates a rollout, deleted when the test ends.
func createRollout(t *testing.T, name string, s rolloutSpec) {
	t.Helper()
	r := &v1alpha1.KubeletConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "KubeletConfigRollout"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.KubeletConfigRolloutSpec{
			NodeSelector: s.selector,
			ConfigMapRef: contract.ConfigMapRef{Namespace: configNamespace, Name: s.configMap},
			Paused:       s.paused,
			OnFailure:    s.onFailure,
			Drain:        s.drain,
			Trial:        s.trial,
		},
	}
	if s.canary > 0 {
		r.Spec.Canary = &s.canary
	}
	if s.maxUnavailable > 0 {
		mu := intstr.FromInt(s.maxUnavailable)
		r.Spec.MaxUnavailable = &mu
	}
	if _, err := rollouts.Create(t.Context(), r, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating rollout %s: %v", name, err)
	}
	t.Cleanup(func() { deleteRollout(t, name) })
}

func deleteRollout(t *testing.T, name string) {
	_ = rollouts.Delete(context.Background(), name, metav1.DeleteOptions{})
}

func getRollout(ctx context.Context, name string) (*v1alpha1.KubeletConfigRollout, error) {
	return rollouts.Get(ctx, name, metav1.GetOptions{})
}

func patchRollout(t *testing.T, name string, spec map[string]any) {
	t.Helper()
	if err := patchSpec(t.Context(), name, spec); err != nil {
		t.Fatal(err)
	}
}

// pauseInCleanup pauses the rollouts from a cleanup, where t.Context() is
// already done.
func pauseInCleanup(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := patchSpec(context.Background(), name, map[string]any{"paused": true}); err != nil {
			t.Error(err)
		}
	}
}

func patchSpec(ctx context.Context, name string, spec map[string]any) error {
	body, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	if _, err := rollouts.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching rollout %s: %w", name, err)
	}
	return nil
}

func condition(r *v1alpha1.KubeletConfigRollout, kind string) *metav1.Condition {
	return meta.FindStatusCondition(r.Status.Conditions, kind)
}

func describe(r *v1alpha1.KubeletConfigRollout) string { return framework.DescribeRollout(r) }

// waitRollout waits until the rollout's status satisfies want.
func waitRollout(t *testing.T, name, what string, want func(*v1alpha1.KubeletConfigRollout) bool) *v1alpha1.KubeletConfigRollout {
	t.Helper()
	var last *v1alpha1.KubeletConfigRollout
	err := framework.Eventually(t.Context(), waitTimeout, "rollout "+name+": "+what, func(ctx context.Context) (bool, string, error) {
		r, err := getRollout(ctx, name)
		if err != nil {
			return false, err.Error(), nil
		}
		last = r
		return want(r), describe(r), nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, controllerLogs())
	}
	return last
}

func isTrue(r *v1alpha1.KubeletConfigRollout, kind, reason string) bool {
	c := condition(r, kind)
	return c != nil && c.Status == metav1.ConditionTrue && (reason == "" || c.Reason == reason)
}

func progressing(r *v1alpha1.KubeletConfigRollout, reason string) bool {
	c := condition(r, v1alpha1.ConditionProgressing)
	return c != nil && c.Reason == reason
}

func controllerLogs() string {
	var b strings.Builder
	for _, c := range controllers {
		fmt.Fprintf(&b, "controller %s log tail:\n%s\n", c.Identity, c.LogTail(25))
	}
	return b.String()
}

// configMap creates an eligible ConfigMap holding config, named after the
// test.
func configMap(t *testing.T, name, config string) *corev1.ConfigMap {
	t.Helper()
	cm, err := framework.PutKubeletConfigMap(t.Context(), env.Admin, configNamespace, name, config)
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := env.Admin.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// source is the Node's nodeguard.dev/config-source, "<absent>" when unset.
func source(t *testing.T, name string) string {
	t.Helper()
	v, ok := node(t, name).Annotations[contract.ConfigSourceAnnotation]
	if !ok {
		return "<absent>"
	}
	return v
}

func sources(t *testing.T, names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = source(t, n)
	}
	return out
}

// waitRuns waits until every named Node's agent reports cm running.
func waitRuns(t *testing.T, names []string, cm *corev1.ConfigMap) {
	t.Helper()
	for _, name := range names {
		if _, err := nodes[name].WaitReport(t.Context(), waitTimeout, name+" to run "+cm.Name, func(r framework.Report) bool {
			return framework.RefersTo(r.Status.Active, cm) && framework.RefersTo(r.Status.LastKnownGood, cm) &&
				r.Condition != nil && r.Condition.Status == corev1.ConditionTrue
		}); err != nil {
			t.Fatalf("%v\n%s", err, controllerLogs())
		}
	}
}

// settle waits until the named Nodes are Ready and their agents report
// KubeletConfigReady True, whatever they run, clearing an assignment that
// an earlier test left failing: every test starts from healthy Nodes.
func settle(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		r, err := nodes[name].Report(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r.Condition == nil || r.Condition.Status != corev1.ConditionTrue {
			if err := nodes[name].Assign(t.Context(), ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range names {
		if _, err := env.WaitNodeReady(t.Context(), name, waitTimeout); err != nil {
			t.Fatal(err)
		}
		if _, err := nodes[name].WaitReport(t.Context(), waitTimeout, name+" to settle", func(r framework.Report) bool {
			return r.Condition != nil && r.Condition.Status == corev1.ConditionTrue
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// journalLen is how many kubelet starts the Node's unit has recorded.
func journalLen(t *testing.T, name string) int {
	t.Helper()
	restarts, err := nodes[name].KubeletRestarts()
	if err != nil {
		t.Fatal(err)
	}
	return len(restarts)
}

// startsWith counts the kubelet starts since the first skip that ran the
// Node's current kubelet file.
func startsWithCurrentFile(t *testing.T, name string, skip int) int {
	t.Helper()
	file, err := nodes[name].KubeletConfig()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(file))
	want := hex.EncodeToString(sum[:])
	restarts, err := nodes[name].KubeletRestarts()
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, r := range restarts[skip:] {
		if r.SHA256 == want {
			count++
		}
	}
	return count
}

// unavailability watches the Nodes and records, from what their kubelets
// and agents report (Ready, KubeletConfigReady, config-status) and their
// assignment, the most of them unavailable at once: not Ready, or
// KubeletConfigReady not True, or assigned something their agent does not
// yet report last-known-good.
type unavailability struct {
	mu     sync.Mutex
	state  map[string]bool
	most   int
	at     string
	cancel context.CancelFunc
	done   chan struct{}
}

func watchUnavailability(t *testing.T, names []string) *unavailability {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	u := &unavailability{state: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	list, err := env.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if slices.Contains(names, list.Items[i].Name) {
			u.observe(&list.Items[i])
		}
	}
	w, err := env.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(u.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				return
			}
			if n, ok := ev.Object.(*corev1.Node); ok && slices.Contains(names, n.Name) {
				u.observe(n)
			}
		}
	}()
	t.Cleanup(u.stop)
	return u
}

func (u *unavailability) stop() {
	u.cancel()
	<-u.done
}

func (u *unavailability) observe(n *corev1.Node) {
	unavailable := false
	if ready := framework.NodeReadyCondition(n); ready == nil || ready.Status != corev1.ConditionTrue {
		unavailable = true
	}
	var kcr *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == contract.ConditionKubeletConfigReady {
			kcr = &n.Status.Conditions[i]
		}
	}
	if kcr == nil || kcr.Status != corev1.ConditionTrue {
		unavailable = true
	}
	if src := n.Annotations[contract.ConfigSourceAnnotation]; src != "" {
		var st contract.ConfigStatus
		_ = json.Unmarshal([]byte(n.Annotations[contract.ConfigStatusAnnotation]), &st)
		if st.LastKnownGood == nil || st.LastKnownGood.Namespace+"/"+st.LastKnownGood.Name != src ||
			st.Active == nil || *st.Active != *st.LastKnownGood {
			unavailable = true
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.state[n.Name] = unavailable
	count := 0
	var which []string
	for name, un := range u.state {
		if un {
			count++
			which = append(which, name)
		}
	}
	if count > u.most {
		slices.Sort(which)
		u.most, u.at = count, strings.Join(which, ", ")
	}
}

// Most is the most Nodes seen unavailable at once, and which.
func (u *unavailability) Most() (int, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.most, u.at
}

// label sets (value non-nil) or removes a label on the Nodes, as an
// administrator. It works in cleanups too, after the test's context ended.
func label(t *testing.T, key string, value *string, names ...string) {
	t.Helper()
	for _, name := range names {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Admin.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// holds checks, for a bounded time, that cond stays true: what a test
// uses to show that something does not happen.
func holds(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok, detail := cond(); !ok {
			t.Fatalf("%s: %s\n%s", what, detail, controllerLogs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// metav1LabelIn selects Nodes whose key is one of values.
func metav1LabelIn(key string, values ...string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}}}
}

// waitEvent waits for an Event the controller recorded regarding the named
// object with the reason.
func waitEvent(t *testing.T, kind, name, reason string) {
	t.Helper()
	err := framework.Eventually(t.Context(), waitTimeout, fmt.Sprintf("a %s Event on %s %s", reason, kind, name), func(ctx context.Context) (bool, string, error) {
		list, err := env.Admin.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name {
				if e.Reason == reason && e.ReportingController == "nodeguard-rollout-controller" {
					return true, "", nil
				}
				seen = append(seen, e.Reason)
			}
		}
		return false, "seen " + strings.Join(seen, ", "), nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, controllerLogs())
	}
}

// leaderMetric is a sample of the leading replica's /metrics, -1 when
// absent.
func leaderMetric(t *testing.T, sample string) float64 {
	t.Helper()
	for _, c := range controllers {
		if leading, err := c.Leading(); err != nil || !leading {
			continue
		}
		body, err := c.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, sample+" ") {
				var v float64
				if _, err := fmt.Sscan(strings.TrimPrefix(line, sample+" "), &v); err == nil {
					return v
				}
			}
		}
		return -1
	}
	t.Fatal("no replica leads")
	return -1
}
