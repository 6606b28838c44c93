package graph

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

func node(name, rv, assignment string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	n.Status.NodeInfo.KubeletVersion = "v1.37.2"
	if assignment != "" {
		n.Annotations = map[string]string{contract.ConfigSourceAnnotation: assignment}
	}
	return n
}

func legacyNode(name, rv, namespace, cm string) *corev1.Node {
	n := node(name, rv, "")
	n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: namespace, Name: cm, KubeletConfigKey: "kubelet"}}
	return n
}

func configMap(namespace, name string, eligible bool) *metav1.PartialObjectMetadata {
	cm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if eligible {
		cm.Labels = map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}
	}
	return cm
}

func pod(namespace, name, nodeName string, mutate ...func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + namespace + "-" + name)}}
	p.Spec.NodeName = nodeName
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

func volumeCM(cm string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Volumes = append(s.Volumes, corev1.Volume{VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}})
	}
}

func projectedCM(cm string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Volumes = append(s.Volumes, corev1.Volume{VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}},
			}}}})
	}
}

func envCM(kind, cm string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		env := []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Key: "k"}}}}
		switch kind {
		case "init":
			s.InitContainers = append(s.InitContainers, corev1.Container{Name: "i", Env: env})
		case "ephemeral":
			s.EphemeralContainers = append(s.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Env: env}})
		default:
			s.Containers = append(s.Containers, corev1.Container{Name: "c", Env: env})
		}
	}
}

func envFromCM(cm string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Containers = append(s.Containers, corev1.Container{Name: "c", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}})
	}
}

// check is one expected answer: can node read namespace/name?
type check struct {
	node, namespace, name string
	want                  bool
}

func TestGraph(t *testing.T) {
	tests := []struct {
		name   string
		events func(g *Graph)
		checks []check
	}{
		{
			name: "assignment of an eligible ConfigMap reaches only its node",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertNode(node("n1", "1", "ns/a"))
				g.UpsertNode(node("n2", "1", ""))
			},
			checks: []check{{"n1", "ns", "a", true}, {"n2", "ns", "a", false}, {"n1", "ns", "b", false}, {"n1", "other", "a", false}},
		},
		{
			name: "assignment of a non-eligible ConfigMap reaches nothing",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", false))
				g.UpsertNode(node("n1", "1", "ns/a"))
			},
			checks: []check{{"n1", "ns", "a", false}},
		},
		{
			name: "ConfigMap that is never seen reaches nothing",
			events: func(g *Graph) {
				g.UpsertNode(node("n1", "1", "ns/a"))
			},
			checks: []check{{"n1", "ns", "a", false}},
		},
		{
			name: "ConfigMap labelled after the assignment starts reaching",
			events: func(g *Graph) {
				g.UpsertNode(node("n1", "1", "ns/a"))
				g.UpsertConfigMap(configMap("ns", "a", true))
			},
			checks: []check{{"n1", "ns", "a", true}},
		},
		{
			name: "ConfigMap losing its label stops reaching",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertNode(node("n1", "1", "ns/a"))
				g.UpsertConfigMap(configMap("ns", "a", false))
			},
			checks: []check{{"n1", "ns", "a", false}},
		},
		{
			name: "deleted ConfigMap stops reaching, and reaches again when re-created",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertConfigMap(configMap("ns", "b", true))
				g.UpsertNode(node("n1", "1", "ns/a"))
				g.UpsertNode(node("n2", "1", "ns/b"))
				g.DeleteConfigMap("ns", "a")
				g.DeleteConfigMap("ns", "b")
				g.UpsertConfigMap(configMap("ns", "b", true))
			},
			checks: []check{{"n1", "ns", "a", false}, {"n2", "ns", "b", true}},
		},
		{
			name: "reassignment moves the path",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertConfigMap(configMap("ns", "b", true))
				g.UpsertNode(node("n1", "1", "ns/a"))
				g.UpsertNode(node("n1", "2", "ns/b"))
			},
			checks: []check{{"n1", "ns", "a", false}, {"n1", "ns", "b", true}},
		},
		{
			name: "cleared assignment removes the path",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertNode(node("n1", "1", "ns/a"))
				g.UpsertNode(node("n1", "2", ""))
			},
			checks: []check{{"n1", "ns", "a", false}},
		},
		{
			name: "malformed annotation assigns nothing",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertNode(node("n1", "1", "ns-a"))
				g.UpsertNode(node("n2", "1", "ns/a/b"))
			},
			checks: []check{{"n1", "ns", "a", false}, {"n2", "ns", "a", false}},
		},
		{
			name: "legacy spec.configSource counts as an assignment; the annotation wins",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertConfigMap(configMap("ns", "b", true))
				g.UpsertNode(legacyNode("n1", "1", "ns", "a"))
				n2 := legacyNode("n2", "1", "ns", "a")
				n2.Annotations = map[string]string{contract.ConfigSourceAnnotation: "ns/b"}
				g.UpsertNode(n2)
			},
			checks: []check{{"n1", "ns", "a", true}, {"n2", "ns", "a", false}, {"n2", "ns", "b", true}},
		},
		{
			name: "deleted node loses its assignment, also when re-created without one",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertNode(node("n1", "1", "ns/a"))
				g.DeleteNode("n1")
				g.UpsertNode(node("n1", "5", ""))
			},
			checks: []check{{"n1", "ns", "a", false}},
		},
		{
			name: "pod references in every place reach the pod's node only",
			events: func(g *Graph) {
				g.UpsertPod(pod("ns", "p", "n1", volumeCM("vol"), projectedCM("proj"), envCM("", "env"),
					envCM("init", "init"), envCM("ephemeral", "eph"), envFromCM("from")))
			},
			checks: []check{
				{"n1", "ns", "vol", true}, {"n1", "ns", "proj", true}, {"n1", "ns", "env", true},
				{"n1", "ns", "init", true}, {"n1", "ns", "eph", true}, {"n1", "ns", "from", true},
				{"n2", "ns", "vol", false}, {"n1", "other", "vol", false},
			},
		},
		{
			name: "pod references need no eligibility and no ConfigMap object",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "c", false))
				g.UpsertPod(pod("ns", "p", "n1", volumeCM("c")))
			},
			checks: []check{{"n1", "ns", "c", true}},
		},
		{
			name: "unbound pod reaches nothing",
			events: func(g *Graph) {
				g.UpsertPod(pod("ns", "p", "", volumeCM("c")))
			},
			checks: []check{{"n1", "ns", "c", false}},
		},
		{
			name: "deleted pod stops reaching; a path shared with another pod stays",
			events: func(g *Graph) {
				g.UpsertPod(pod("ns", "p1", "n1", volumeCM("shared"), volumeCM("own")))
				g.UpsertPod(pod("ns", "p2", "n1", envCM("", "shared")))
				g.DeletePod("ns", "p1")
			},
			checks: []check{{"n1", "ns", "shared", true}, {"n1", "ns", "own", false}},
		},
		{
			name: "pod path and assignment path to the same ConfigMap are counted apart",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertNode(node("n1", "1", "ns/a"))
				g.UpsertPod(pod("ns", "p", "n1", volumeCM("a")))
				g.UpsertNode(node("n1", "2", ""))
			},
			checks: []check{{"n1", "ns", "a", true}},
		},
		{
			name: "pod re-created on another node moves its paths even without a delete",
			events: func(g *Graph) {
				g.UpsertPod(pod("ns", "p", "n1", volumeCM("c")))
				g.UpsertPod(pod("ns", "p", "n2", volumeCM("c")))
			},
			checks: []check{{"n1", "ns", "c", false}, {"n2", "ns", "c", true}},
		},
		{
			name: "replayed events are no-ops",
			events: func(g *Graph) {
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertConfigMap(configMap("ns", "a", true))
				g.UpsertNode(node("n1", "1", "ns/a"))
				g.UpsertNode(node("n1", "1", "ns/a"))
				p := pod("ns", "p", "n1", volumeCM("c"))
				g.UpsertPod(p)
				g.UpsertPod(p)
				g.DeletePod("ns", "p")
				g.DeletePod("ns", "p")
				g.DeleteConfigMap("ns", "zzz")
				g.DeleteNode("never")
			},
			checks: []check{{"n1", "ns", "a", true}, {"n1", "ns", "c", false}},
		},
	}
	for _, tt := range tests {
		for _, syncedFirst := range []bool{false, true} {
			name := tt.name
			if syncedFirst {
				name += " (after sync)"
			}
			t.Run(name, func(t *testing.T) {
				g := New(nil)
				if syncedFirst {
					g.MarkSynced()
				}
				tt.events(g)
				g.MarkSynced()
				for _, c := range tt.checks {
					if got := g.CanReadConfigMap(c.node, c.namespace, c.name); got != c.want {
						t.Errorf("CanReadConfigMap(%s, %s/%s) = %v, want %v", c.node, c.namespace, c.name, got, c.want)
					}
				}
			})
		}
	}
}

func TestUnsyncedGraphAnswersNothing(t *testing.T) {
	g := New(nil)
	g.UpsertConfigMap(configMap("ns", "a", true))
	g.UpsertNode(node("n1", "1", "ns/a"))
	if g.Synced() || g.CanReadConfigMap("n1", "ns", "a") {
		t.Fatal("unsynced graph answered a read")
	}
	if _, ok := g.Node("n1"); ok {
		t.Fatal("unsynced graph returned a node")
	}
	g.MarkSynced()
	if !g.CanReadConfigMap("n1", "ns", "a") {
		t.Fatal("synced graph refused an assigned ConfigMap")
	}
}

func TestNodeInfo(t *testing.T) {
	g := New(nil)
	g.MarkSynced()
	n := node("n1", "1", "ns/a")
	n.Labels = map[string]string{"pool": "blue"}
	g.UpsertNode(n)
	bad := node("n2", "1", "not-a-ref")
	bad.Status.NodeInfo.KubeletVersion = "garbage"
	g.UpsertNode(bad)

	info, ok := g.Node("n1")
	if !ok || info.ParsedKubeletVersion == nil || info.ParsedKubeletVersion.String() != "1.37.2" ||
		info.Labels["pool"] != "blue" || info.Assignment == nil || info.Assignment.ConfigMap.String() != "ns/a" {
		t.Fatalf("Node(n1) = %+v, %v", info, ok)
	}
	info, ok = g.Node("n2")
	if !ok || info.ParsedKubeletVersion != nil || info.VersionError == "" || info.Assignment != nil || info.AssignmentError == "" {
		t.Fatalf("Node(n2) = %+v, %v", info, ok)
	}
	g.DeleteNode("n1")
	if _, ok := g.Node("n1"); ok {
		t.Fatal("deleted node still known")
	}
}

// TestEntriesAreReleased checks that churn leaves no node entries behind.
func TestEntriesAreReleased(t *testing.T) {
	g := New(nil)
	g.MarkSynced()
	g.UpsertConfigMap(configMap("ns", "a", true))
	for i := 0; i < 3; i++ {
		g.UpsertNode(node("n1", "1", "ns/a"))
		g.UpsertPod(pod("ns", "p", "n2", volumeCM("c")))
		g.DeletePod("ns", "p")
		g.DeleteNode("n1")
	}
	g.DeleteConfigMap("ns", "a")
	for i := range g.shards {
		if n := len(*g.shards[i].Load()); n != 0 {
			t.Fatalf("shard %d still holds %d entries", i, n)
		}
	}
	if len(g.pods) != 0 || len(g.assignees) != 0 || len(g.eligible) != 0 {
		t.Fatalf("writer state not empty: pods=%d assignees=%d eligible=%d", len(g.pods), len(g.assignees), len(g.eligible))
	}
}

func TestPopulatorUnwrapsTombstones(t *testing.T) {
	g := New(nil)
	p := &Populator{graph: g}
	g.MarkSynced()
	p.upsertConfigMap(configMap("ns", "a", true))
	p.upsertNode(node("n1", "1", "ns/a"))
	p.upsertPod(pod("ns", "p", "n1", volumeCM("c")))

	p.deletePod(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod("ns", "p", "n1", volumeCM("c"))})
	p.deleteConfigMap(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: nil})
	if g.CanReadConfigMap("n1", "ns", "c") || g.CanReadConfigMap("n1", "ns", "a") {
		t.Fatal("tombstoned deletes were not applied")
	}
	p.deleteNode(cache.DeletedFinalStateUnknown{Key: "n1", Obj: "garbage"})
	if _, ok := g.Node("n1"); ok {
		t.Fatal("tombstoned node delete with an unusable object was not applied by key")
	}
	// Objects of the wrong type are ignored, not panicked on.
	p.upsertNode("garbage")
	p.upsertPod(42)
	p.upsertConfigMap(nil)
	p.deletePod(cache.DeletedFinalStateUnknown{Key: "", Obj: nil})
}

func TestTrimKeepsWhatTheGraphReads(t *testing.T) {
	full := pod("ns", "p", "n1", volumeCM("vol"), projectedCM("proj"), envCM("", "env"),
		envCM("init", "init"), envCM("ephemeral", "eph"), envFromCM("from"))
	full.Spec.Containers = append(full.Spec.Containers, corev1.Container{Name: "plain", Image: "busybox"})
	full.Status.Phase = corev1.PodRunning
	trimmed, err := TrimPod(full)
	if err != nil {
		t.Fatal(err)
	}
	want := podConfigMaps(full)
	got := podConfigMaps(trimmed.(*corev1.Pod))
	if len(got) != len(want) || len(got) != 6 {
		t.Fatalf("trimmed pod references %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("trimmed pod references %v, want %v", got, want)
		}
	}
	if tp := trimmed.(*corev1.Pod); tp.Status.Phase != "" || tp.Spec.NodeName != "n1" || tp.UID != full.UID {
		t.Fatalf("trimmed pod kept or lost the wrong fields: %+v", tp)
	}

	n := legacyNode("n1", "7", "ns", "a")
	n.Annotations = map[string]string{contract.ConfigSourceAnnotation: "ns/b", "other": "x"}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"big"}}}
	tn, err := TrimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	got1, want1 := nodeInfoFrom(tn.(*corev1.Node)), nodeInfoFrom(n)
	if got1.Assignment.ConfigMap != want1.Assignment.ConfigMap || got1.KubeletVersion != want1.KubeletVersion ||
		len(tn.(*corev1.Node).Status.Images) != 0 || tn.(*corev1.Node).Annotations["other"] != "" {
		t.Fatalf("trimmed node = %+v", tn)
	}
}

func TestNodesAssignedTo(t *testing.T) {
	g := New(nil)
	g.UpsertNode(node("n2", "1", "ns/a"))
	g.UpsertNode(node("n1", "1", "ns/a"))
	g.UpsertNode(node("n3", "1", "ns/b"))
	if got := g.NodesAssignedTo("ns", "a"); got != nil {
		t.Fatalf("before sync: %v", got)
	}
	g.MarkSynced()
	if got := g.NodesAssignedTo("ns", "a"); len(got) != 2 || slices.Min(got) != "n1" || slices.Max(got) != "n2" {
		t.Fatalf("NodesAssignedTo(ns/a) = %v", got)
	}
	g.UpsertNode(node("n1", "2", ""))
	if got := g.NodesAssignedTo("ns", "a"); len(got) != 1 || got[0] != "n2" {
		t.Fatalf("after unassign: %v", got)
	}
}
