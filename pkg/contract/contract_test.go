package contract

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeIdentity(t *testing.T) {
	tests := []struct {
		user     string
		groups   []string
		wantName string
		wantNode bool
	}{
		{"system:node:n1", []string{"system:authenticated", NodesGroup}, "n1", true},
		{"system:node:n1", []string{"system:authenticated"}, "", false},
		{"bob", []string{NodesGroup}, "", true},
		{"system:node:", []string{NodesGroup}, "", true},
		{"admin", []string{"system:masters"}, "", false},
		{"", nil, "", false},
	}
	for _, tt := range tests {
		name, isNode := NodeIdentity(tt.user, tt.groups)
		if name != tt.wantName || isNode != tt.wantNode {
			t.Errorf("NodeIdentity(%q, %v) = %q, %v; want %q, %v", tt.user, tt.groups, name, isNode, tt.wantName, tt.wantNode)
		}
	}
}

func TestParseConfigSource(t *testing.T) {
	tests := []struct {
		value   string
		want    ConfigMapRef
		ok      bool
		wantErr bool
	}{
		{"", ConfigMapRef{}, false, false},
		{"ns/name", ConfigMapRef{"ns", "name"}, true, false},
		{"kube-system/pool.blue-1", ConfigMapRef{"kube-system", "pool.blue-1"}, true, false},
		{"name", ConfigMapRef{}, false, true},
		{"/name", ConfigMapRef{}, false, true},
		{"ns/", ConfigMapRef{}, false, true},
		{"ns/a/b", ConfigMapRef{}, false, true},
		{"NS/name", ConfigMapRef{}, false, true},
		{"ns/../etc", ConfigMapRef{}, false, true},
	}
	for _, tt := range tests {
		got, ok, err := ParseConfigSource(tt.value)
		if got != tt.want || ok != tt.ok || (err != nil) != tt.wantErr {
			t.Errorf("ParseConfigSource(%q) = %v, %v, %v", tt.value, got, ok, err)
		}
	}
}

func TestAssignmentOf(t *testing.T) {
	legacy := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "old", KubeletConfigKey: "custom"}}
	tests := []struct {
		name    string
		node    corev1.Node
		want    Assignment
		ok      bool
		wantErr bool
	}{
		{"none", corev1.Node{}, Assignment{}, false, false},
		{"annotation", corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ConfigSourceAnnotation: "ns/a"}}},
			Assignment{ConfigMap: ConfigMapRef{"ns", "a"}, Key: ConfigMapKey}, true, false},
		{"empty annotation means local even with a legacy source", corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ConfigSourceAnnotation: ""}},
			Spec:       corev1.NodeSpec{ConfigSource: legacy}}, Assignment{}, false, false},
		{"legacy", corev1.Node{Spec: corev1.NodeSpec{ConfigSource: legacy}},
			Assignment{ConfigMap: ConfigMapRef{"ns", "old"}, Key: "custom", Legacy: true}, true, false},
		{"legacy without key", corev1.Node{Spec: corev1.NodeSpec{ConfigSource: &corev1.NodeConfigSource{
			ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "old"}}}},
			Assignment{ConfigMap: ConfigMapRef{"ns", "old"}, Key: ConfigMapKey, Legacy: true}, true, false},
		{"legacy without namespace", corev1.Node{Spec: corev1.NodeSpec{ConfigSource: &corev1.NodeConfigSource{
			ConfigMap: &corev1.ConfigMapNodeConfigSource{Name: "old"}}}}, Assignment{}, false, true},
		{"malformed annotation", corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ConfigSourceAnnotation: "x"}}},
			Assignment{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := AssignmentOf(&tt.node)
			if got != tt.want || ok != tt.ok || (err != nil) != tt.wantErr {
				t.Errorf("AssignmentOf() = %+v, %v, %v", got, ok, err)
			}
		})
	}
}

func TestRuleRefusal(t *testing.T) {
	if got, want := RuleFeatureGates.Refusal("cannot assign a/b to node \"n\""), `nodeguard rule 5 (feature-gates): cannot assign a/b to node "n"`; got != want {
		t.Errorf("Refusal = %q, want %q", got, want)
	}
}
