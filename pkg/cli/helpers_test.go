package cli

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardfake "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/fake"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
)

const (
	testNamespace = "kubelet-configs"
	goodConfig    = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"
	// newGateConfig names a gate that kubelets before 1.37 do not know.
	newGateConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  APIServerWebhookAuthenticationToken: true\n"
	// lockedConfig flips a gate locked to true at 1.37.
	lockedConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  CPUManagerPolicyOptions: false\n"
	unknownField = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPodz: 110\n"
	// unknownGateConfig names a gate no kubelet knows.
	unknownGateConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  NoSuchGate: true\n"
	invalidValue      = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 150\n"
)

// testNow is the clock of every unit test.
var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type runResult struct {
	code        int
	out, errOut string
}

// runFake runs the plugin against client, with namespace as the
// kubeconfig's (not explicit) namespace.
func runFake(t *testing.T, client kubernetes.Interface, args ...string) runResult {
	t.Helper()
	return runFakeClients(t, client, nil, args...)
}

// runFakeClients is runFake with a rollout client too, for the rollout
// commands; the waits poll every millisecond.
func runFakeClients(t *testing.T, client kubernetes.Interface, rollouts *nodeguardfake.Clientset, args ...string) runResult {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	e := &env{
		streams: streams,
		client:  func() (kubernetes.Interface, error) { return client, nil },
		rollouts: func() (nodeguardclient.KubeletConfigRolloutInterface, error) {
			if rollouts == nil {
				return nil, errors.New("this test has no rollout client")
			}
			return rollouts.NodeguardV1alpha1().KubeletConfigRollouts(), nil
		},
		poll:      time.Millisecond,
		namespace: func() (string, bool, error) { return testNamespace, false, nil },
		now:       func() time.Time { return testNow },
	}
	code := execute(t.Context(), newRootCommand(e), args, streams)
	return runResult{code: code, out: out.String(), errOut: errOut.String()}
}

func testNode(name, kubeletVersion string, annotations map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Annotations: annotations,
		Labels: map[string]string{"pool": "blue"}}}
	n.Status.NodeInfo.KubeletVersion = kubeletVersion
	return n
}

func assigned(ref string) map[string]string {
	return map[string]string{contract.ConfigSourceAnnotation: ref}
}

func testConfigMap(name, content string, eligible bool) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name},
		Data: map[string]string{contract.ConfigMapKey: content}}
	if eligible {
		// As configurations should be: 'kubectl nodeguard create' makes them so.
		immutable := true
		cm.Labels = map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}
		cm.Immutable = &immutable
	}
	return cm
}
