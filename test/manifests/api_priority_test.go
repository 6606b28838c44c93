package manifests

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/rollout/controller"
	"github.com/nodeguard/nodeguard/test/controlplane"
)

// What manifests/components/api-priority names.
const (
	apiPriorityComponent    = "components/api-priority"
	controllerFlowSchema    = "nodeguard-rollout-controller"
	controllerLeaseSchema   = "nodeguard-rollout-controller-leader-election"
	controllerPriorityLevel = "nodeguard-rollout-controller"
	leaderElectionLevel     = "leader-election"
)

// renderWithComponents renders manifests/<overlay> with the components
// under manifests/ added, as an operator's own kustomization adds them.
func renderWithComponents(t *testing.T, overlay string, components ...string) objects {
	t.Helper()
	root, err := Dir("")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, c := range components {
		paths = append(paths, filepath.Join(root, c))
	}
	dir := t.TempDir()
	if err := WriteKustomization(dir, filepath.Join(root, overlay), paths...); err != nil {
		t.Fatal(err)
	}
	objs, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// The controller's priority level queues what the controller puts in
// flight at its defaults beyond the level's seats: a wave's assignments
// (--max-patches-in-flight), the trial-passed marks and a burst of Events.
// It is one flow (ByUser), so what it can queue is a hand of queues.
func TestAPIPriorityQueuesTheControllersBurst(t *testing.T) {
	objs := renderWithComponents(t, base, apiPriorityComponent)
	level := mustTyped[flowcontrolv1.PriorityLevelConfiguration](t, objs, "PriorityLevelConfiguration", controllerPriorityLevel)
	if level.Spec.Type != flowcontrolv1.PriorityLevelEnablementLimited || level.Spec.Limited == nil {
		t.Fatalf("priority level %s is not Limited", level.Name)
	}
	q := level.Spec.Limited.LimitResponse.Queuing
	if level.Spec.Limited.LimitResponse.Type != flowcontrolv1.LimitResponseTypeQueue || q == nil {
		t.Fatalf("priority level %s rejects what exceeds its seats instead of queuing it", level.Name)
	}
	burst := controller.DefaultMaxPatchesInFlight + controller.MarksInFlight + controller.DefaultEventBurst
	if held := int(q.HandSize * q.QueueLengthLimit); held < burst {
		t.Errorf("one flow queues %d requests (handSize %d x queueLengthLimit %d), fewer than the controller's %d in flight at its defaults",
			held, q.HandSize, q.QueueLengthLimit, burst)
	}
	for _, name := range []string{controllerFlowSchema, controllerLeaseSchema} {
		fs := mustTyped[flowcontrolv1.FlowSchema](t, objs, "FlowSchema", name)
		if fs.Spec.DistinguisherMethod == nil || fs.Spec.DistinguisherMethod.Type != flowcontrolv1.FlowDistinguisherMethodByUserType {
			t.Errorf("FlowSchema %s: distinguisher %v, want ByUser", name, fs.Spec.DistinguisherMethod)
		}
		for _, rule := range fs.Spec.Rules {
			for _, s := range rule.Subjects {
				if s.Kind != flowcontrolv1.SubjectKindServiceAccount || s.ServiceAccount == nil ||
					s.ServiceAccount.Name != rolloutControllerName || s.ServiceAccount.Namespace != namespace {
					t.Errorf("FlowSchema %s matches %+v, not the rollout controller's ServiceAccount alone", name, s)
				}
			}
		}
	}
}

// TestAPIPriorityClassifiesTheController applies manifests/base with
// components/api-priority to a real kube-apiserver and reads how its
// priority and fairness classifies requests (the
// X-Kubernetes-PF-FlowSchema-UID and -PriorityLevel-UID headers of every
// answer): the rollout controller's token in its own level, its Lease in
// leader-election, and another ServiceAccount's requests in neither.
func TestAPIPriorityClassifiesTheController(t *testing.T) {
	cp, admin := startWithoutWebhooks(t, renderWithComponents(t, base, apiPriorityComponent))
	ctx := t.Context()
	flowcontrol := admin.FlowcontrolV1()
	uid := func(get func() (metav1.Object, error)) string {
		obj, err := get()
		if err != nil {
			t.Fatal(err)
		}
		return string(obj.GetUID())
	}
	schema := func(name string) string {
		return uid(func() (metav1.Object, error) { return flowcontrol.FlowSchemas().Get(ctx, name, metav1.GetOptions{}) })
	}
	level := func(name string) string {
		return uid(func() (metav1.Object, error) {
			return flowcontrol.PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{})
		})
	}
	ours := classification{schema(controllerFlowSchema), level(controllerPriorityLevel)}
	lease := classification{schema(controllerLeaseSchema), level(leaderElectionLevel)}

	controllerHTTP := tokenClient(t, cp, admin, rolloutControllerName)
	webhookHTTP := tokenClient(t, cp, admin, webhookName)
	leasePath := "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases/" + rolloutControllerName

	// The apiserver picks new FlowSchemas up from its own watch, within a
	// second or so; until then the controller's requests are in
	// workload-low.
	var got classification
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got = classifyMethod(t, controllerHTTP, http.MethodGet, cp.URL()+"/api/v1/nodes?limit=1")
		return got == ours, nil
	})
	if err != nil {
		t.Fatalf("the controller's list of Nodes is classified %+v, want its own FlowSchema and level %+v", got, ours)
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
		method string
		path   string
		want   func(classification) bool
		says   string
	}{
		{"the controller's Node patch", controllerHTTP, http.MethodPatch, "/api/v1/nodes/node-a", is(ours), "in its own level"},
		{"the controller's Events", controllerHTTP, http.MethodGet, "/apis/events.k8s.io/v1/namespaces/default/events", is(ours), "in its own level"},
		{"the controller's Lease", controllerHTTP, http.MethodGet, leasePath, is(lease), "in leader-election"},
		{"a Lease elsewhere", controllerHTTP, http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/default/leases/" + rolloutControllerName, is(ours), "in its own level, not leader-election"},
		{"another ServiceAccount", webhookHTTP, http.MethodGet, "/api/v1/nodes?limit=1", neither(ours, lease), "in neither of the component's levels"},
		{"another ServiceAccount's Lease", webhookHTTP, http.MethodGet, leasePath, neither(ours, lease), "in neither of the component's levels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classifyMethod(t, tc.client, tc.method, cp.URL()+tc.path)
			if !tc.want(got) {
				t.Errorf("classified %+v, want it %s (own %+v, lease %+v)", got, tc.says, ours, lease)
			}
		})
	}

	// Both schemas point at levels that exist: neither is dangling.
	for _, name := range []string{controllerFlowSchema, controllerLeaseSchema} {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			fs, err := flowcontrol.FlowSchemas().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range fs.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
					return c.Status == flowcontrolv1.ConditionFalse, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Errorf("FlowSchema %s never reported Dangling False: %v", name, err)
		}
	}
}

// startWithoutWebhooks starts a control plane and applies objs to it, but
// for the ValidatingWebhookConfiguration: no webhook runs here, and it
// fails closed.
func startWithoutWebhooks(t *testing.T, objs objects) (*controlplane.ControlPlane, kubernetes.Interface) {
	t.Helper()
	cp := controlplane.StartForTest(t, controlplane.Options{})
	admin, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	var apply []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() != "ValidatingWebhookConfiguration" {
			apply = append(apply, obj)
		}
	}
	if err := Apply(t.Context(), cp.AdminConfig(), apply); err != nil {
		t.Fatal(err)
	}
	return cp, admin
}

// classification is the FlowSchema and priority level that served a
// request, by UID.
type classification struct{ schema, level string }

func is(want classification) func(classification) bool {
	return func(got classification) bool { return got == want }
}

func neither(a, b classification) func(classification) bool {
	return func(got classification) bool {
		return got.schema != "" && got.level != "" && got.schema != a.schema && got.schema != b.schema && got.level != a.level && got.level != b.level
	}
}

// classifyMethod sends a request and returns how priority and fairness
// classified it, whatever the answer (it classifies before authorization
// and before the object is looked up).
func classifyMethod(t *testing.T, client *http.Client, method, url string) classification {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return classification{resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID),
		resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)}
}

// tokenClient is an HTTP client with a token of the ServiceAccount name in
// nodeguard's namespace.
func tokenClient(t *testing.T, cp *controlplane.ControlPlane, admin kubernetes.Interface, name string) *http.Client {
	t.Helper()
	client, err := rest.HTTPClientFor(tokenConfig(t, cp, admin, name))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// tokenConfig reaches the apiserver with a token of the ServiceAccount name
// in nodeguard's namespace (TokenRequest, as the e2e framework and a pod
// get one).
func tokenConfig(t *testing.T, cp *controlplane.ControlPlane, admin kubernetes.Interface, name string) *rest.Config {
	t.Helper()
	expiry := int64(time.Hour / time.Second)
	token, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: cp.URL(), BearerToken: token.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA().CertPEM()}}
}
