package cluster

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// ConfigNamespace holds the eligible kubelet ConfigMaps that nodes are
// assigned.
const ConfigNamespace = "nodeguard-configs"

// KubeletVersion is what every generated Node reports.
const KubeletVersion = "v1.37.2"

// Shape sizes a generated cluster.
type Shape struct {
	Nodes       int
	PodsPerNode int
	// Namespaces spreads the pods; each pod lands in one of them.
	Namespaces int
	// EligibleConfigMaps are labelled kubelet ConfigMaps; node i is
	// assigned the one numbered i modulo this count. Zero means no
	// assignments at all.
	EligibleConfigMaps int
}

// Pods is the number of pods the shape generates.
func (s Shape) Pods() int { return s.Nodes * s.PodsPerNode }

func (s Shape) String() string {
	return fmt.Sprintf("%d nodes x %d pods", s.Nodes, s.PodsPerNode)
}

// Validate reports a shape that cannot generate a cluster.
func (s Shape) Validate() error {
	if s.Nodes < 2 || s.PodsPerNode < 1 || s.Namespaces < 1 || s.EligibleConfigMaps < 0 {
		return fmt.Errorf("cluster shape %+v: want at least 2 nodes, 1 pod per node and 1 namespace", s)
	}
	return nil
}

// Cluster is a generated set of API objects. Pods are ordered node by node.
type Cluster struct {
	Shape      Shape
	Nodes      []*corev1.Node
	Pods       []*corev1.Pod
	ConfigMaps []*metav1.PartialObjectMetadata
}

// NodeName names node i.
func NodeName(i int) string { return "node-" + pad(i, 5) }

// PodName names pod j of node i.
func PodName(i, j int) string { return "pod-" + pad(i, 5) + "-" + pad(j, 3) }

// PodConfigMapNames are the two ConfigMaps pod j of node i references: one
// through a volume, one through envFrom.
func PodConfigMapNames(i, j int) [2]string {
	pod := PodName(i, j)
	return [2]string{pod + "-volume", pod + "-env"}
}

// PodNamespace is the namespace of pod j of node i.
func (s Shape) PodNamespace(i, j int) string {
	return "ns-" + pad((i*s.PodsPerNode+j)%s.Namespaces, 3)
}

// EligibleConfigMapName names eligible ConfigMap k.
func EligibleConfigMapName(k int) string { return "kubelet-config-" + pad(k, 5) }

// AssignedConfigMap is the eligible ConfigMap node i is assigned, if any.
func (s Shape) AssignedConfigMap(i int) (string, bool) {
	if s.EligibleConfigMaps == 0 {
		return "", false
	}
	return EligibleConfigMapName(i % s.EligibleConfigMaps), true
}

// Generate builds the cluster's objects.
func Generate(s Shape) (*Cluster, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{
		Shape:      s,
		Nodes:      make([]*corev1.Node, s.Nodes),
		Pods:       make([]*corev1.Pod, 0, s.Pods()),
		ConfigMaps: make([]*metav1.PartialObjectMetadata, s.EligibleConfigMaps),
	}
	for k := range c.ConfigMaps {
		c.ConfigMaps[k] = &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace:       ConfigNamespace,
				Name:            EligibleConfigMapName(k),
				UID:             types.UID("cm-uid-" + strconv.Itoa(k)),
				ResourceVersion: "1",
				Labels:          map[string]string{contract.EligibleLabel: contract.EligibleLabelValue},
			},
		}
	}
	for i := range s.Nodes {
		c.Nodes[i] = s.node(i)
		for j := range s.PodsPerNode {
			c.Pods = append(c.Pods, s.Pod(i, j))
		}
	}
	return c, nil
}

func (s Shape) node(i int) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:            NodeName(i),
		UID:             types.UID("node-uid-" + strconv.Itoa(i)),
		ResourceVersion: "1",
		Labels:          map[string]string{corev1.LabelHostname: NodeName(i)},
	}}
	if cm, ok := s.AssignedConfigMap(i); ok {
		n.Annotations = map[string]string{contract.ConfigSourceAnnotation: ConfigNamespace + "/" + cm}
	}
	n.Status.NodeInfo.KubeletVersion = KubeletVersion
	return n
}

// Pod builds pod j of node i, bound to the node and referencing its two
// ConfigMaps. Calling it twice gives equal, distinct objects, which is what
// a writer that adds and deletes the same pod needs.
func (s Shape) Pod(i, j int) *corev1.Pod {
	cms := PodConfigMapNames(i, j)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       s.PodNamespace(i, j),
			Name:            PodName(i, j),
			UID:             types.UID("pod-uid-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)),
			ResourceVersion: "1",
		},
		Spec: corev1.PodSpec{
			NodeName: NodeName(i),
			Volumes: []corev1.Volume{{
				Name: "config",
				VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cms[0]},
				}},
			}},
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.k8s.io/pause:3.10",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cms[1]},
				}}},
			}},
		},
	}
	return pod
}

// pad formats n with at least width digits, without fmt's cost: generating
// a 300k-pod cluster calls it millions of times.
func pad(n, width int) string {
	s := strconv.Itoa(n)
	for len(s) < width {
		s = "0" + s
	}
	return s
}
