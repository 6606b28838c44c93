package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

func TestGenerate(t *testing.T) {
	s := Shape{Nodes: 7, PodsPerNode: 3, Namespaces: 4, EligibleConfigMaps: 5}
	c, err := Generate(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 7 || len(c.Pods) != 21 || len(c.ConfigMaps) != 5 {
		t.Fatalf("got %d nodes, %d pods, %d configmaps; want 7, 21, 5", len(c.Nodes), len(c.Pods), len(c.ConfigMaps))
	}
	for i, n := range c.Nodes {
		ref, ok, err := contract.AssignmentOf(n)
		want, _ := s.AssignedConfigMap(i)
		if err != nil || !ok || ref.ConfigMap != (contract.ConfigMapRef{Namespace: ConfigNamespace, Name: want}) {
			t.Errorf("node %s: assignment %+v, %v, %v; want %s/%s", n.Name, ref, ok, err, ConfigNamespace, want)
		}
	}
	seen := map[string]bool{}
	for _, p := range c.Pods {
		var refs []string
		for _, v := range p.Spec.Volumes {
			if v.ConfigMap != nil {
				refs = append(refs, v.ConfigMap.Name)
			}
		}
		for _, ctr := range p.Spec.Containers {
			for _, e := range ctr.EnvFrom {
				if e.ConfigMapRef != nil {
					refs = append(refs, e.ConfigMapRef.Name)
				}
			}
		}
		if len(refs) != 2 {
			t.Errorf("pod %s/%s references %v, want two ConfigMaps", p.Namespace, p.Name, refs)
		}
		for _, r := range refs {
			if seen[p.Namespace+"/"+r] {
				t.Errorf("ConfigMap %s/%s is referenced by two pods; every pod must have its own", p.Namespace, r)
			}
			seen[p.Namespace+"/"+r] = true
		}
	}
	for _, cm := range c.ConfigMaps {
		if !contract.IsEligible(cm.Labels) {
			t.Errorf("ConfigMap %s is not eligible", cm.Name)
		}
	}
	if _, err := Generate(Shape{Nodes: 1, PodsPerNode: 1, Namespaces: 1}); err == nil {
		t.Error("a one-node shape generated; refused reads need two nodes")
	}
}

// TestRequests checks each kind against the objects: an allowed read names
// a ConfigMap of a pod on the requesting node, a refused one a ConfigMap
// of a pod on another node.
func TestRequests(t *testing.T) {
	s := Shape{Nodes: 5, PodsPerNode: 4, Namespaces: 3}
	c, err := Generate(s)
	if err != nil {
		t.Fatal(err)
	}
	podOf := map[string]*corev1.Pod{}
	for _, p := range c.Pods {
		for _, v := range p.Spec.Volumes {
			podOf[p.Namespace+"/"+v.ConfigMap.Name] = p
		}
		podOf[p.Namespace+"/"+p.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name] = p
	}
	for _, kind := range []Kind{AllowedRead, RefusedRead, NonNode, OwnNodeGet} {
		for _, r := range s.Requests(kind, 50, 9) {
			pod := podOf[r.Namespace+"/"+r.Name]
			switch kind {
			case AllowedRead:
				if !r.Allowed || pod == nil || pod.Spec.NodeName != r.Node {
					t.Errorf("%s %+v: the ConfigMap's pod is not on the node", kind, r)
				}
			case RefusedRead:
				if r.Allowed || pod == nil || pod.Spec.NodeName == r.Node {
					t.Errorf("%s %+v: the ConfigMap's pod is on the node", kind, r)
				}
			case NonNode:
				if _, isNode := contract.NodeIdentity(r.User, r.Groups); isNode || r.Allowed {
					t.Errorf("%s %+v: user is a node", kind, r)
				}
			case OwnNodeGet:
				if name, isNode := contract.NodeIdentity(r.User, r.Groups); !isNode || name != r.Name || r.Resource != "nodes" {
					t.Errorf("%s %+v: not a read of the node's own Node", kind, r)
				}
			}
		}
	}
}
