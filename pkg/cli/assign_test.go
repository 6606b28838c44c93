package cli

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// assignCluster has three nodes: node-a local, node-b already on "good",
// node-old with a kubelet that does not know newGateConfig's gate.
func assignCluster() *fake.Clientset {
	return fake.NewClientset(
		testNode("node-a", "v1.37.2", nil),
		testNode("node-b", "v1.37.2", assigned(testNamespace+"/good")),
		testNode("node-old", "v1.35.1", nil),
		testConfigMap("good", goodConfig, true),
		testConfigMap("newgate", newGateConfig, true),
		testConfigMap("plain", goodConfig, false),
	)
}

// patches lists the node patches a fake clientset received.
func patches(client *fake.Clientset) []k8stesting.PatchAction {
	var out []k8stesting.PatchAction
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "nodes" {
			out = append(out, p)
		}
	}
	return out
}

func annotationOf(t *testing.T, client *fake.Clientset, node string) (string, bool) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := n.Annotations[contract.ConfigSourceAnnotation]
	return v, ok
}

func TestAssign(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantCode    int
		wantOut     []string
		wantPatched []string
	}{
		{"client dry run", []string{"assign", "good", "node-a", "node-b", "--dry-run=client"}, ExitOK, []string{
			"node/node-a: local -> kubelet-configs/good: would be assigned\n",
			"node/node-b: kubelet-configs/good: unchanged\n",
			"2 node(s): 1 would be assigned, 1 unchanged; dry run (client): nothing was sent\n",
		}, nil},
		{"bare --dry-run is client", []string{"assign", "kubelet-configs/good", "node-a", "--dry-run"}, ExitOK, []string{
			"would be assigned",
		}, nil},
		{"write", []string{"assign", "kubelet-configs/good", "-l", "pool=blue"}, ExitOK, []string{
			"node/node-a: local -> kubelet-configs/good: assigned\n",
			"node/node-b: kubelet-configs/good: unchanged\n",
			"node/node-old: local -> kubelet-configs/good: assigned\n",
			"3 node(s): 2 assigned, 1 unchanged\n",
		}, []string{"node-a", "node-old"}},
		{"a refused node stops every write", []string{"assign", "newgate", "node-a", "node-old"}, ExitRefused, []string{
			"node/node-a: local -> kubelet-configs/newgate: not written\n",
			"node/node-old: local -> kubelet-configs/newgate: refused\n",
			`    client check: nodeguard rule 5 (feature-gates): cannot assign kubelet-configs/newgate to node "node-old" (kubelet v1.35.1): featureGates[APIServerWebhookAuthenticationToken]`,
			"nothing was written because the client-side checks refused a node\n",
		}, nil},
		{"client dry run shows refusals too", []string{"assign", "newgate", "node-old", "--dry-run=client"}, ExitRefused, []string{
			"node/node-old: local -> kubelet-configs/newgate: refused\n",
		}, nil},
		{"not eligible", []string{"assign", "plain", "node-a"}, ExitRefused, []string{
			"client check: ConfigMap kubelet-configs/plain is not an eligible kubelet configuration",
		}, nil},
		{"missing ConfigMap", []string{"assign", "nope", "node-a"}, ExitRefused, []string{
			"client check: ConfigMap kubelet-configs/nope does not exist",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := assignCluster()
			r := runFake(t, client, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr %q", r.code, tt.wantCode, r.errOut)
			}
			for _, want := range tt.wantOut {
				if !strings.Contains(r.out, want) {
					t.Errorf("output lacks %q:\n%s", want, r.out)
				}
			}
			var patched []string
			for _, p := range patches(client) {
				patched = append(patched, p.GetName())
				if p.GetPatchType() != types.MergePatchType || string(p.GetPatch()) != `{"metadata":{"annotations":{"nodeguard.dev/config-source":"kubelet-configs/good"}}}` {
					t.Errorf("patch of %s: %s %s", p.GetName(), p.GetPatchType(), p.GetPatch())
				}
			}
			if strings.Join(patched, ",") != strings.Join(tt.wantPatched, ",") {
				t.Errorf("patched %v, want %v", patched, tt.wantPatched)
			}
			for _, node := range tt.wantPatched {
				if v, _ := annotationOf(t, client, node); v != testNamespace+"/good" {
					t.Errorf("%s annotation = %q after the write", node, v)
				}
			}
		})
	}
}

func TestUnassign(t *testing.T) {
	legacy := testNode("node-legacy", "v1.37.2", nil)
	legacy.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: testNamespace, Name: "old", KubeletConfigKey: "kubelet"}}
	client := fake.NewClientset(
		testNode("node-a", "v1.37.2", assigned(testNamespace+"/good")),
		testNode("node-local", "v1.37.2", nil),
		testNode("node-bad", "v1.37.2", assigned("garbage")),
		legacy,
	)
	r := runFake(t, client, "unassign", "node-a", "node-local", "node-bad", "node-legacy")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	for _, want := range []string{
		"node/node-a: kubelet-configs/good -> local: unassigned\n",
		"node/node-bad: <invalid \"garbage\"> -> local: unassigned\n",
		"node/node-legacy: kubelet-configs/old (legacy spec.configSource) -> local: unassigned\n",
		"node/node-local: local: unchanged\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if _, present := annotationOf(t, client, "node-a"); present {
		t.Error("node-a still has the annotation")
	}
	if _, present := annotationOf(t, client, "node-bad"); present {
		t.Error("node-bad still has the annotation")
	}
	// Removing the annotation would let the legacy source apply again.
	if v, present := annotationOf(t, client, "node-legacy"); !present || v != "" {
		t.Errorf("node-legacy annotation = %q, %v; want present and empty", v, present)
	}
	if n := len(patches(client)); n != 3 {
		t.Errorf("%d patches, want 3 (none for the unchanged node)", n)
	}
}

func TestChangeUsage(t *testing.T) {
	client := assignCluster()
	for _, tt := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"assign"}, "give the ConfigMap to assign", ExitError},
		{[]string{"assign", "good"}, "give at least one node name, or a selector", ExitError},
		{[]string{"assign", "good", "node-a", "-l", "pool=blue"}, "not both", ExitError},
		{[]string{"assign", "good", "node-a", "--dry-run=maybe"}, `invalid --dry-run "maybe"`, ExitError},
		{[]string{"assign", "a/b/c", "node-a"}, `invalid ConfigMap "a/b/c"`, ExitError},
		{[]string{"assign", "good", "node-a", "node-x"}, `node "node-x" not found`, ExitError},
		{[]string{"assign", "good", "-l", "pool=green"}, `no nodes match the selector "pool=green"`, ExitError},
		{[]string{"unassign"}, "give at least one node name, or a selector", ExitError},
	} {
		r := runFake(t, client, tt.args...)
		if r.code != tt.code || !strings.Contains(r.errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.errOut, tt.code, tt.want)
		}
	}
	if n := len(patches(client)); n != 0 {
		t.Errorf("usage errors wrote %d patches", n)
	}
}

func TestResolveConfigMap(t *testing.T) {
	for _, tt := range []struct {
		arg, namespace string
		explicit       bool
		want           string
		wantErr        string
	}{
		{"ns/name", "default", false, "ns/name", ""},
		{"name", "team", false, "team/name", ""},
		{"name", "team", true, "team/name", ""},
		{"team/name", "team", true, "team/name", ""},
		{"other/name", "team", true, "", `names namespace "other" but -n says "team"`},
		{"Bad/name", "default", false, "", "invalid ConfigMap"},
		{"", "default", false, "", "invalid ConfigMap"},
	} {
		e := &env{namespace: func() (string, bool, error) { return tt.namespace, tt.explicit, nil }}
		got, err := e.resolveConfigMap(tt.arg)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.arg, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("%q: %v, %v; want %s", tt.arg, got, err, tt.want)
		}
	}
}

// TestServerAnswers covers what only the server can say: a refusal, and a
// failure to answer, which exit differently.
func TestServerAnswers(t *testing.T) {
	for _, tt := range []struct {
		name     string
		err      error
		wantCode int
		want     string
	}{
		{"refused", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "node-a",
			errors.New(`admission webhook "nodes.nodeguard.dev" denied the request: nodeguard rule 5 (feature-gates): no`)),
			ExitRefused, "node/node-a: local -> kubelet-configs/good: refused by the server\n    server: nodes \"node-a\" is forbidden: admission webhook"},
		{"no answer", apierrors.NewInternalError(errors.New("etcd is gone")), ExitError,
			"node/node-a: local -> kubelet-configs/good: failed\n    server: Internal error occurred: etcd is gone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := assignCluster()
			client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tt.err })
			r := runFake(t, client, "assign", "good", "node-a")
			if r.code != tt.wantCode || !strings.Contains(r.out, tt.want) {
				t.Errorf("exit %d (want %d), output:\n%s\nwant %q", r.code, tt.wantCode, r.out, tt.want)
			}
		})
	}
}
