package admission_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

const noSuchGateConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  NoSuchGate: true\n"

// warnings keeps the admission warnings an admin client is sent.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := strings.Join(w.seen, "\n")
	w.seen = nil
	return seen
}

func (h *harness) adminWithWarnings() (kubernetes.Interface, *warnings) {
	h.t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(h.env.CP.AdminConfig())
	cfg.WarningHandler = w
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return c, w
}

// report has a node report a kubelet version in its own status.
func (h *harness) report(node, kubeletVersion string) {
	h.t.Helper()
	c := h.nodeClient(node)
	n, err := c.CoreV1().Nodes().Get(h.ctx, node, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	n.Status.NodeInfo.KubeletVersion = kubeletVersion
	if _, err := c.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{}); err != nil {
		h.t.Fatalf("%s reporting kubelet %q: %v", node, kubeletVersion, err)
	}
}

func (h *harness) assign(node, ref string) {
	h.t.Helper()
	_, err := h.admin.CoreV1().Nodes().Patch(h.ctx, node, types.MergePatchType, annotationPatch(ref), metav1.PatchOptions{})
	allowed(h.t, "assigning "+ref+" to "+node, err)
}

// setContent writes content into the ConfigMap ref names, as admin.
func (h *harness) setContent(admin kubernetes.Interface, name, content string) error {
	cm, err := admin.CoreV1().ConfigMaps(configNamespace).Get(h.ctx, h.pfx+name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	cm.Data[contract.ConfigMapKey] = content
	_, err = admin.CoreV1().ConfigMaps(configNamespace).Update(h.ctx, cm, metav1.UpdateOptions{})
	return err
}

// TestSelfReportedVersionsSteerOnlyTheirNode is issue 17 item 3: a node
// that lowers its reported kubelet version cannot block edits of the
// ConfigMap it shares with its pool; it is named as not trusted instead.
func TestSelfReportedVersionsSteerOnlyTheirNode(t *testing.T) {
	h := newHarness(t, env)
	admin, seen := h.adminWithWarnings()
	n1, n2 := h.mustRegister("v-n1"), h.mustRegister("v-n2")
	pool := h.mustConfigMap("v-pool", goodConfig, true)
	h.assign(n1, pool)
	h.assign(n2, pool)
	// The pool runs v1.37.2; n2 now claims v1.35.0, which lacks the gate.
	h.report(n2, "v1.35.0")

	want := n2 + " (reported kubelet v1.35.0 after 1.37.2)"
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen.take()
		err := h.setContent(admin, "v-pool", newGateConfig)
		if err != nil {
			t.Fatalf("editing the pool's ConfigMap, which every kubelet that has reported its version truthfully can run: %v", err)
		}
		if w := seen.take(); strings.Contains(w, want) {
			break
		}
		// The webhook had not seen the assignments or the new report yet.
		if err := h.setContent(admin, "v-pool", goodConfig); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no edit was ever judged with %s marked as not trusted", n2)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestUnparseableVersionDoesNotSkipRule5 is issue 17 item 3: a node
// reporting a version that does not parse no longer makes rule 5 accept a
// gate no kubelet knows, on assignment or on an edit.
func TestUnparseableVersionDoesNotSkipRule5(t *testing.T) {
	h := newHarness(t, env)
	n3, n4 := h.mustRegister("u-n3"), h.mustRegister("u-n4")
	h.report(n3, "not-a-version")
	h.report(n4, "not-a-version")

	// Unassigned, nothing judges its gates yet.
	nosuch := h.mustConfigMap("u-nosuch", noSuchGateConfig, true)
	err := h.assignOnceSeen(n3, nosuch)
	refused(t, "assigning a gate no kubelet knows to a node with an unparseable version", err,
		"nodeguard rule 5 (feature-gates)", `reports no parseable kubelet version ("not-a-version"), and no kubelet nodeguard knows`, "NoSuchGate")

	plain := h.mustConfigMap("u-plain", goodConfig, true)
	h.assign(n4, plain)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := h.setContent(h.admin, "u-plain", noSuchGateConfig)
		if err != nil {
			refused(t, "editing a configuration assigned to that node to a gate no kubelet knows", err,
				"nodeguard rule 6 (config-content)", n4+` (reports no parseable kubelet version "not-a-version")`, "NoSuchGate")
			break
		}
		if err := h.setContent(h.admin, "u-plain", goodConfig); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("an edit to a gate no kubelet knows was accepted for %s for 30s", n4)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
