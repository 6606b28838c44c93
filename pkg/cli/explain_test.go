package cli

import (
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestConfigMapUses(t *testing.T) {
	ref := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "direct", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("cfg")}}},
			{Name: "other", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("else")}}},
			{Name: "bundle", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: ref("cfg")}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("cfg")}},
			}}}},
		},
		InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("cfg")}}}}},
		Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{
			{Name: "PLAIN", Value: "cfg"},
			{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref("cfg"), Key: "level"}}},
			{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref("cfg"), Key: "k"}}},
		}}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("cfg")}}}}}},
	}}
	want := []string{`volume "direct"`, `projected volume "bundle"`, `init container "init" envFrom`, `container "app" env LEVEL`, `ephemeral container "debug" envFrom`}
	if got := configMapUses(pod, "cfg"); !slices.Equal(got, want) {
		t.Errorf("uses of cfg = %q, want %q", got, want)
	}
	if got := configMapUses(pod, "none"); len(got) != 0 {
		t.Errorf("uses of none = %q", got)
	}
}

// answerReviews makes the fake apiserver answer SubjectAccessReviews with
// status, and records the spec asked.
func answerReviews(client *fake.Clientset, status authorizationv1.SubjectAccessReviewStatus, asked *authorizationv1.SubjectAccessReviewSpec) {
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		*asked = review.Spec
		review.Status = status
		return true, review, nil
	})
}

func boundPod(name, node, configMap string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}}}}}
}

func TestExplain(t *testing.T) {
	allowed := authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "node may read the ConfigMap: it is assigned to the node or used by a pod bound to it"}
	noOpinion := authorizationv1.SubjectAccessReviewStatus{Reason: "no path from the ConfigMap to the node in the graph\nno relationship found"}
	objects := []runtime.Object{
		testNode("node-a", "v1.37.2", assigned(testNamespace+"/good")),
		testNode("node-b", "v1.37.2", assigned(testNamespace+"/plain")),
		testNode("node-c", "v1.37.2", nil),
		testConfigMap("good", goodConfig, true),
		testConfigMap("plain", goodConfig, false),
		testConfigMap("app", "x", false),
		boundPod("web", "node-c", "app"),
		boundPod("elsewhere", "node-a", "app"),
	}
	tests := []struct {
		name   string
		args   []string
		answer authorizationv1.SubjectAccessReviewStatus
		want   []string
		avoid  []string
	}{
		{"assigned and eligible", []string{"explain", "node-a", "kubelet-configs/good"}, allowed, []string{
			"  configmap:   exists, eligible (label nodeguard.dev/kubelet-config=true)\n",
			"  assignment:  node-a is assigned it (annotation nodeguard.dev/config-source) and it is eligible: a path\n",
			"  pods:        none of the 1 pod(s) bound to node-a in namespace kubelet-configs uses it\n",
			"  path:        yes, through the assignment\n",
			"Authorizer (SubjectAccessReview: user system:node:node-a, groups system:nodes, system:authenticated; get configmaps kubelet-configs/good):\n",
			"  decision:    allowed\n",
			"  reason:      node may read the ConfigMap: it is assigned to the node or used by a pod bound to it\n",
		}, []string{"Note:"}},
		{"assigned but not eligible", []string{"explain", "node-b", "plain"}, noOpinion, []string{
			"  configmap:   exists, not eligible",
			"but the ConfigMap is not eligible: no path\n",
			"  pods:        no pod is bound to node-b in namespace kubelet-configs\n",
			"  path:        none: assigned but not eligible; no pod bound to the node uses it\n",
			"  decision:    not allowed (no authorizer allowed it)\n",
			"  reason:      no path from the ConfigMap to the node in the graph; no relationship found\n",
		}, []string{"Note:"}},
		{"another node", []string{"explain", "node-c", "good"}, noOpinion, []string{
			"  assignment:  node-c is not assigned anything (local configuration)\n",
			"  path:        none: not assigned; no pod bound to the node uses it\n",
		}, nil},
		{"a pod uses it", []string{"explain", "node-c", "app"}, allowed, []string{
			"  configmap:   exists, not eligible",
			"  pods:        pod kubelet-configs/web uses it: container \"app\" envFrom\n",
			"  path:        yes, through pod kubelet-configs/web\n",
			"  decision:    allowed\n",
		}, []string{"elsewhere", "Note:"}},
		{"the answers disagree", []string{"explain", "node-a", "good"}, noOpinion, []string{
			"  path:        yes, through the assignment\n",
			"Note: the graph path exists but the authorizer did not allow",
		}, nil},
		{"nothing exists", []string{"explain", "node-x", "gone"}, authorizationv1.SubjectAccessReviewStatus{}, []string{
			"  configmap:   does not exist\n",
			"  assignment:  node node-x does not exist\n",
			"  reason:      (none given)\n",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(objects...)
			var asked authorizationv1.SubjectAccessReviewSpec
			answerReviews(client, tt.answer, &asked)
			r := runFake(t, client, tt.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.errOut)
			}
			for _, want := range tt.want {
				if !strings.Contains(r.out, want) {
					t.Errorf("output lacks %q:\n%s", want, r.out)
				}
			}
			for _, avoid := range tt.avoid {
				if strings.Contains(r.out, avoid) {
					t.Errorf("output has %q:\n%s", avoid, r.out)
				}
			}
			ra := asked.ResourceAttributes
			if asked.User != "system:node:"+tt.args[1] || !slices.Contains(asked.Groups, "system:nodes") || ra == nil ||
				ra.Verb != "get" || ra.Resource != "configmaps" || ra.Namespace != testNamespace || ra.Group != "" {
				t.Errorf("review asked %+v (%+v)", asked, ra)
			}
		})
	}
	r := runFake(t, fake.NewClientset(), "explain", "node-a")
	if r.code != ExitError || !strings.Contains(r.errOut, "want NODE and CONFIGMAP") {
		t.Errorf("one argument: exit %d, %q", r.code, r.errOut)
	}
}
