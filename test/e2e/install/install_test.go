package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/pkg/certs"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// runningWithin bounds the wait for every pod to run: the controllers
// create them, the scheduler binds them and the kubelets start them on the
// fake runtime, seconds on an idle machine and generous for a busy one.
const runningWithin = 3 * time.Minute

// nodes are the cluster's nodes; the agent's DaemonSet tolerates every
// taint, so it has a pod on each.
var nodes = []string{"install-a", "install-b", "install-c"}

// wantLevel is the Pod Security level each component's namespace must
// enforce: the webhook and the controller meet restricted; the agent needs
// hostPath volumes and the host's network, which only privileged allows.
var wantLevel = map[string]string{
	"webhook":            "restricted",
	"rollout-controller": "restricted",
	"agent":              "privileged",
}

// TestShippedManifestsRunOnRealKubelets installs nodeguard as the package
// documentation says and checks that every workload it ships runs, with
// the built images, under the Pod Security level its namespace enforces.
func TestShippedManifestsRunOnRealKubelets(t *testing.T) {
	ctx := t.Context()
	workloads := workloadsOf(t, env.Manifests)
	createWebhookSecrets(t, env, workloads)
	for _, name := range nodes {
		node, err := framework.StartNode(ctx, env, framework.NodeOptions{Name: name, Binaries: binaries})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("kubelet log of %s:\n%s", name, node.KubeletLogTail(30))
			}
			node.Stop()
			_ = env.Admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}

	used := map[string]bool{}
	for _, w := range workloads {
		t.Run(w.component, func(t *testing.T) {
			checkLevel(t, env, w)
			for _, pod := range waitRunning(t, env, w) {
				for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
					if !built.isBuilt(c.Image) {
						t.Errorf("pod %s container %s runs %q, not an image the build produced (%s)", pod.Name, c.Name, c.Image, built)
					}
					used[c.Image] = true
				}
			}
		})
	}
	for _, ref := range built.refs {
		if !used[ref] {
			t.Errorf("no pod runs the built image %s", ref)
		}
	}
	checkDisruptionBudgets(t, env, workloads)
	checkEnforced(t, env, workloads)
}

// workload is a Deployment or DaemonSet of the manifests, with the number
// of pods it has once the nodes run.
type workload struct {
	kind, namespace, name string
	// component is its app.kubernetes.io/component label.
	component string
	template  corev1.PodTemplateSpec
	selector  *metav1.LabelSelector
	pods      int
}

func (w workload) String() string { return w.kind + " " + w.namespace + "/" + w.name }

// workloadsOf picks the Deployments and DaemonSets out of the applied
// manifests; it fails the test unless there are the webhook's, the
// controller's and the agent's.
func workloadsOf(t *testing.T, objs []*unstructured.Unstructured) []workload {
	t.Helper()
	var out []workload
	for _, obj := range objs {
		var w workload
		switch obj.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			fromUnstructured(t, obj, &d)
			replicas := 1
			if d.Spec.Replicas != nil {
				replicas = int(*d.Spec.Replicas)
			}
			w = workload{kind: "Deployment", template: d.Spec.Template, selector: d.Spec.Selector, pods: replicas}
		case "DaemonSet":
			var d appsv1.DaemonSet
			fromUnstructured(t, obj, &d)
			w = workload{kind: "DaemonSet", template: d.Spec.Template, selector: d.Spec.Selector, pods: len(nodes)}
		default:
			continue
		}
		w.namespace, w.name = obj.GetNamespace(), obj.GetName()
		w.component = obj.GetLabels()["app.kubernetes.io/component"]
		out = append(out, w)
	}
	var components []string
	for _, w := range out {
		components = append(components, w.component)
	}
	sort.Strings(components)
	if want := []string{"agent", "rollout-controller", "webhook"}; !slices.Equal(components, want) {
		t.Fatalf("the manifests ship workloads of components %v, want %v", components, want)
	}
	return out
}

func fromUnstructured(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// createWebhookSecrets mints the webhook's certificates with pkg/certs
// (what `make certs` runs) and creates the two Secrets its Deployment
// mounts, with the names and keys of the static-certs overlay.
func createWebhookSecrets(t *testing.T, e *framework.Env, workloads []workload) {
	t.Helper()
	var namespace string
	for _, w := range workloads {
		if w.component == "webhook" {
			namespace = w.namespace
		}
	}
	dir := mintWebhookCerts(t, namespace)
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	secrets := []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "nodeguard-webhook-tls", Namespace: namespace},
			Type:       corev1.SecretTypeTLS,
			Data: map[string][]byte{
				corev1.TLSCertKey:       read(certs.WebhookServingCertFile),
				corev1.TLSPrivateKeyKey: read(certs.WebhookServingKeyFile),
				"ca.crt":                read(certs.WebhookCACertFile),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "nodeguard-apiserver-client-ca", Namespace: namespace},
			Data:       map[string][]byte{"ca.crt": read(certs.ClientCACertFile)},
		},
	}
	for _, s := range secrets {
		if _, err := e.Admin.CoreV1().Secrets(namespace).Create(t.Context(), s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// mintWebhookCerts writes the webhook's certificates with pkg/certs (what
// `make certs` runs) into a directory, with the file names nodeguard-certs
// gives them.
func mintWebhookCerts(t *testing.T, namespace string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := certs.WriteBundle(certs.Bundle{
		Dir:              dir,
		ServingHosts:     certs.ServiceHosts("nodeguard-webhook", namespace, "cluster.local"),
		ClientCommonName: "kube-apiserver",
		CAValidity:       24 * time.Hour,
		CertValidity:     time.Hour,
	}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkLevel: the workload's namespace enforces the level it must meet.
// That its pods exist at all (waitRunning) shows the apiserver's Pod
// Security admission admitted them at that level.
func checkLevel(t *testing.T, e *framework.Env, w workload) {
	t.Helper()
	ns, err := e.Admin.CoreV1().Namespaces().Get(t.Context(), w.namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ns.Labels["pod-security.kubernetes.io/enforce"], wantLevel[w.component]; got != want {
		t.Errorf("namespace %s of %s enforces Pod Security level %q, want %q", w.namespace, w, got, want)
	}
}

// waitRunning waits until the workload has all its pods, bound and
// Running (a DaemonSet's one per node), and returns them.
func waitRunning(t *testing.T, e *framework.Env, w workload) []corev1.Pod {
	t.Helper()
	selector, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	err = framework.Eventually(t.Context(), runningWithin, fmt.Sprintf("%d pods of %s Running", w.pods, w), func(ctx context.Context) (bool, string, error) {
		list, err := e.Admin.CoreV1().Pods(w.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return false, err.Error(), nil
		}
		pods = list.Items
		var states []string
		running, onNodes := 0, map[string]bool{}
		for _, pod := range pods {
			states = append(states, podState(pod))
			if pod.Status.Phase == corev1.PodRunning && pod.Spec.NodeName != "" {
				running++
				onNodes[pod.Spec.NodeName] = true
			}
		}
		done := len(pods) == w.pods && running == w.pods
		if w.kind == "DaemonSet" {
			done = done && len(onNodes) == len(nodes)
		}
		return done, strings.Join(states, "; "), nil
	})
	if err != nil {
		t.Fatalf("%v\nwarnings in %s:\n%s", err, w.namespace, warnings(e, w.namespace))
	}
	return pods
}

func podState(pod corev1.Pod) string {
	state := fmt.Sprintf("%s %s on %q", pod.Name, pod.Status.Phase, pod.Spec.NodeName)
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if cs.State.Waiting != nil {
			state += fmt.Sprintf(" (%s waiting: %s %s)", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		}
	}
	return state
}

// warnings lists a namespace's Warning events: a refused pod
// (FailedCreate), an unschedulable one or a volume that cannot be mounted
// says why there.
func warnings(e *framework.Env, namespace string) string {
	list, err := e.Admin.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "  %s %s/%s: %s\n", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
	return b.String()
}

// checkDisruptionBudgets: every PodDisruptionBudget of the manifests is
// reconciled by the disruption controller and counts the pods of the
// workload it protects.
func checkDisruptionBudgets(t *testing.T, e *framework.Env, workloads []workload) {
	t.Helper()
	found := 0
	for _, obj := range e.Manifests {
		if obj.GetKind() != "PodDisruptionBudget" {
			continue
		}
		found++
		var w *workload
		for i := range workloads {
			if workloads[i].namespace == obj.GetNamespace() && workloads[i].component == obj.GetLabels()["app.kubernetes.io/component"] {
				w = &workloads[i]
			}
		}
		if w == nil {
			t.Errorf("PodDisruptionBudget %s/%s protects no workload of the manifests", obj.GetNamespace(), obj.GetName())
			continue
		}
		err := framework.Eventually(t.Context(), runningWithin, "PodDisruptionBudget "+obj.GetName()+" to count the pods of "+w.String(), func(ctx context.Context) (bool, string, error) {
			pdb, err := e.Admin.PolicyV1().PodDisruptionBudgets(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			st := pdb.Status
			return st.ObservedGeneration == pdb.Generation && int(st.ExpectedPods) == w.pods,
				fmt.Sprintf("observedGeneration %d of %d, expectedPods %d", st.ObservedGeneration, pdb.Generation, st.ExpectedPods), nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	if found == 0 {
		t.Error("the manifests ship no PodDisruptionBudget")
	}
}

// checkEnforced: the labels are in force, not decoration. In each
// restricted namespace the apiserver refuses a pod that breaks the level.
func checkEnforced(t *testing.T, e *framework.Env, workloads []workload) {
	t.Helper()
	privileged := true
	for _, w := range workloads {
		if wantLevel[w.component] != "restricted" {
			continue
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-probe-", Namespace: w.namespace},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:            "probe",
				Image:           w.template.Spec.Containers[0].Image,
				SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
			}}},
		}
		_, err := e.Admin.CoreV1().Pods(w.namespace).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Errorf("a privileged pod in %s (namespace of %s): got %v, want Pod Security's refusal", w.namespace, w, err)
		}
	}
}
