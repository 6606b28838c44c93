package install

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/certs"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/images"
	"github.com/nodeguard/nodeguard/test/chart"
	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// rolloutWithin bounds a rollout over two nodes: each node's restart and
// trial, seconds on an idle machine.
const rolloutWithin = 4 * time.Minute

// uninstalledWithin bounds the deletion of everything the chart made, the
// namespaces' contents included.
const uninstalledWithin = 5 * time.Minute

// TestHelmInstall installs nodeguard with `helm install` of charts/nodeguard,
// as docs/install.md does, on a control plane of its own with three real
// kubelets: every workload the chart ships runs the built images under its
// namespace's Pod Security level; the rollout controller, with the token of
// the ServiceAccount the chart made (so the chart's RBAC and
// ValidatingAdmissionPolicy are what it may do), moves the nodes an
// administrator put in a pool to a new configuration, and the agents run
// it; then, in the order docs/install.md gives, the assignments are cleared
// and `helm uninstall` leaves none of the chart's objects, and no release
// record, behind.
//
// As in TestShippedManifestsRunOnRealKubelets, the pods do not execute (the
// fake runtime), so the webhook, the controller and the agents that act are
// processes beside the control plane with the same identities, and the
// installed ValidatingWebhookConfiguration is pointed at the webhook
// process, for want of a Service network.
func TestHelmInstall(t *testing.T) {
	ctx := t.Context()
	dir, err := chart.Dir()
	if err != nil {
		t.Fatal(err)
	}
	workDir := t.TempDir()
	kubeconfig := filepath.Join(workDir, "admin.kubeconfig")
	certDir := mintWebhookCerts(t, "nodeguard")
	values := []string{
		// The images `make images` built for this run, by digest.
		"-f", filepath.Join(built.component, images.ValuesFile),
		"--set", "certificates.source=static",
		"--set-file", "certificates.static.servingCert=" + filepath.Join(certDir, certs.WebhookServingCertFile),
		"--set-file", "certificates.static.servingKey=" + filepath.Join(certDir, certs.WebhookServingKeyFile),
		"--set-file", "certificates.static.servingCA=" + filepath.Join(certDir, certs.WebhookCACertFile),
		"--set-file", "certificates.static.apiserverClientCA=" + filepath.Join(certDir, certs.ClientCACertFile),
	}
	helm := func(args ...string) ([]byte, error) {
		return chart.RunHelm(append(args, "--namespace", chart.ReleaseNamespace, "--kubeconfig", kubeconfig)...)
	}
	install := func(ctx context.Context, admin *rest.Config) ([]*unstructured.Unstructured, error) {
		if err := controlplane.WriteKubeconfig(kubeconfig, admin); err != nil {
			return nil, err
		}
		if _, err := helm(append([]string{"install", "nodeguard", dir}, values...)...); err != nil {
			return nil, err
		}
		manifest, err := helm("get", "manifest", "nodeguard")
		if err != nil {
			return nil, err
		}
		return chart.Decode(manifest)
	}
	e, err := framework.Start(ctx, framework.Options{WorkDir: filepath.Join(workDir, "env"), ControllerManager: true, Scheduler: true, Install: install})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("webhook log tail:\n%s\n\ncontrol plane log tail:\n%s", e.WebhookLogTail(40), e.CP.LogTail(40))
		}
		e.Stop()
	})
	if keys := chart.Keys(e.Manifests); !slices.Contains(keys, "CustomResourceDefinition kubeletconfigrollouts.nodeguard.dev") ||
		!slices.Contains(keys, "ValidatingAdmissionPolicy nodeguard-rollout-controller-nodes") {
		t.Fatalf("helm installed %v, without the CRD or the controller's admission policy", keys)
	}

	// The workloads run, as the kustomize install's do.
	workloads := workloadsOf(t, e.Manifests)
	pool := map[string]bool{"helm-a": true, "helm-b": true, "helm-c": false}
	nodes := map[string]*framework.Node{}
	for _, name := range []string{"helm-a", "helm-b", "helm-c"} {
		opts := framework.NodeOptions{Name: name, Binaries: binaries}
		if pool[name] {
			opts.AdminLabels = map[string]string{contract.PoolLabel: "blue"}
		}
		n, err := framework.StartNode(ctx, e, opts)
		if err != nil {
			t.Fatal(err)
		}
		nodes[name] = n
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("agent log of %s:\n%s\nkubelet log of %s:\n%s", name, n.AgentLogTail(30), name, n.KubeletLogTail(20))
			}
		})
	}
	for _, w := range workloads {
		checkLevel(t, e, w)
		for _, pod := range waitRunning(t, e, w) {
			for _, c := range pod.Spec.Containers {
				if !built.isBuilt(c.Image) {
					t.Errorf("pod %s container %s runs %q, not an image the build produced (%s)", pod.Name, c.Name, c.Image, built)
				}
			}
		}
	}
	checkDisruptionBudgets(t, e, workloads)
	checkEnforced(t, e, workloads)
	if t.Failed() {
		return
	}

	// A pool moved by a rollout, to a change a restart carries both ways
	// (docs/disruptive-changes.md): the chart's own pods run on these
	// nodes, and the webhook's, never ready on the fake runtime, are
	// guarded by its PodDisruptionBudget, which a drain would wait on.
	rc, err := e.StartRolloutController(ctx, "helm-controller")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Stop)
	cm, err := framework.PutKubeletConfigMap(ctx, e.Admin, "kubelet-configs", "pool-blue-v2", "eventRecordQPS: 10\n")
	if err != nil {
		t.Fatal(err)
	}
	rollouts, err := e.Rollouts()
	if err != nil {
		t.Fatal(err)
	}
	maxUnavailable := intstr.FromInt32(1)
	if _, err := rollouts.Create(ctx, &v1alpha1.KubeletConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-blue"},
		Spec: v1alpha1.KubeletConfigRolloutSpec{
			NodeSelector:   metav1.LabelSelector{MatchLabels: map[string]string{contract.PoolLabel: "blue"}},
			ConfigMapRef:   contract.ConfigMapRef{Namespace: cm.Namespace, Name: cm.Name},
			MaxUnavailable: &maxUnavailable,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *v1alpha1.KubeletConfigRollout
	err = framework.Eventually(ctx, rolloutWithin, "rollout pool-blue Complete", func(ctx context.Context) (bool, string, error) {
		r, err := rollouts.Get(ctx, "pool-blue", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		last = r
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionComplete)
		return c != nil && c.Status == metav1.ConditionTrue, framework.DescribeRollout(r), nil
	})
	if err != nil {
		t.Fatalf("%v\nrollout controller log:\n%s", err, rc.LogTail(30))
	}
	if last.Status.Selected != 2 || last.Status.Updated != 2 {
		t.Errorf("rollout pool-blue: %s, want 2 selected and updated", framework.DescribeRollout(last))
	}
	for name, inPool := range pool {
		n, err := e.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := n.Annotations[contract.ConfigSourceAnnotation]
		if want := map[bool]string{true: cm.Namespace + "/" + cm.Name, false: ""}[inPool]; got != want {
			t.Errorf("node %s: config-source %q, want %q", name, got, want)
		}
		if !inPool {
			continue
		}
		if _, err := nodes[name].WaitReport(ctx, rolloutWithin, name+" to run "+cm.Name, func(r framework.Report) bool {
			return framework.RefersTo(r.Status.Active, cm) && framework.RefersTo(r.Status.LastKnownGood, cm)
		}); err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}

	// Uninstalling, as docs/install.md orders it: the rollout deleted (its
	// assignments stay), the assignments cleared and the nodes back on
	// their own configuration, then helm uninstall.
	if err := rollouts.Delete(ctx, "pool-blue", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rc.Stop()
	clear := []byte(`{"metadata":{"annotations":{"` + contract.ConfigSourceAnnotation + `":null}}}`)
	for name, inPool := range pool {
		if !inPool {
			continue
		}
		if _, err := e.Admin.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, clear, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := nodes[name].WaitReport(ctx, rolloutWithin, name+" back on its own configuration", func(r framework.Report) bool {
			return r.Status.Active == nil && r.Condition != nil && r.Condition.Reason == contract.ReasonLocalConfig
		}); err != nil {
			t.Fatal(err)
		}
	}
	gone := objectClients(t, e.CP.AdminConfig(), e.Manifests)
	if _, err := helm("uninstall", "nodeguard"); err != nil {
		t.Fatal(err)
	}
	// The namespaces go last: the namespace controller deletes what is in
	// them, the pods once their kubelets have stopped them.
	err = framework.Eventually(ctx, uninstalledWithin, "every object of the chart deleted", func(ctx context.Context) (bool, string, error) {
		var left []string
		for key, get := range gone {
			if err := get(ctx); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%s (%v)", key, err))
			}
		}
		slices.Sort(left)
		return len(left) == 0, "left: " + strings.Join(left, ", "), nil
	})
	if err != nil {
		t.Error(err)
	}
	// Every state a release record can be in (helm v4 has no --all).
	if out, err := helm("list", "--short", "--deployed", "--failed", "--pending", "--superseded", "--uninstalled", "--uninstalling"); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("helm list after uninstall: %q (%v), want no release", out, err)
	}
	records, err := e.Admin.CoreV1().Secrets(chart.ReleaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(records.Items); n != 0 {
		t.Errorf("%d helm release records left in %s", n, chart.ReleaseNamespace)
	}
	for name := range pool {
		n, err := e.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Spec.Unschedulable {
			t.Errorf("node %s is left cordoned", name)
		}
		if _, ok := n.Annotations[contract.ConfigSourceAnnotation]; ok {
			t.Errorf("node %s is left with an assignment", name)
		}
	}
}

// objectClients returns, for each installed object, a get of it by name,
// mapped while its kinds (the CRD's among them) are still served.
func objectClients(t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured) map[string]func(context.Context) error {
	t.Helper()
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gets := map[string]func(context.Context) error{}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("mapping %s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = client.Resource(mapping.Resource)
		if ns := obj.GetNamespace(); ns != "" {
			ri = client.Resource(mapping.Resource).Namespace(ns)
		}
		name := obj.GetName()
		gets[chart.Key(obj)] = func(ctx context.Context) error {
			_, err := ri.Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	return gets
}
