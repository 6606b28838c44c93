package drain

import (
	"context"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	kubectldrain "k8s.io/kubectl/pkg/drain"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

func withEmptyDir(p *corev1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
}

func withConfigMapVolume(p *corev1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}})
}

func mirror(p *corev1.Pod) { p.Annotations = map[string]string{mirrorPodAnnotation: "hash"} }

func finished(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }

// filterCases are pods and whether kubectl drain --ignore-daemonsets, with
// each combination of its two switches, evicts, keeps or refuses them.
var filterCases = []struct {
	name string
	pod  *corev1.Pod
}{
	{"ReplicaSet pod", pod("rs", ownedBy("ReplicaSet", "apps/v1"))},
	{"StatefulSet pod with a ConfigMap volume", pod("sts", ownedBy("StatefulSet", "apps/v1"), withConfigMapVolume)},
	{"bare pod", pod("bare")},
	{"bare pod owned, but not as controller", pod("weak", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", APIVersion: "apps/v1", Name: "owner", UID: "owner-uid"}}
	})},
	{"ReplicaSet pod with emptyDir", pod("cache", ownedBy("ReplicaSet", "apps/v1"), withEmptyDir)},
	{"bare pod with emptyDir", pod("scratch", withEmptyDir)},
	{"Job pod", pod("job", ownedBy("Job", "batch/v1"))},
	{"DaemonSet pod", pod("ds", ownedBy("DaemonSet", "apps/v1"))},
	{"DaemonSet pod with emptyDir", pod("ds-cache", ownedBy("DaemonSet", "apps/v1"), withEmptyDir)},
	{"mirror pod", pod("static", mirror)},
	{"mirror pod with emptyDir", pod("static-cache", mirror, withEmptyDir)},
	{"pending bare pod", pod("pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })},
}

func verdictOf(evict []*corev1.Pod, blocked []Blocked, name string) string {
	for _, p := range evict {
		if p.Name == name {
			return "evict"
		}
	}
	for _, b := range blocked {
		if b.Name == name {
			return "block"
		}
	}
	return "stay"
}

// TestFilterAgreesWithKubectl runs every pod through kubectl's own drain
// helper (k8s.io/kubectl/pkg/drain, --ignore-daemonsets, the DaemonSet
// existing) under each combination of --force and --delete-emptydir-data,
// and holds Filter to its verdict: evicted, left, or refused.
func TestFilterAgreesWithKubectl(t *testing.T) {
	for _, opts := range []contract.DrainOptions{{}, {Force: true}, {DeleteEmptyDirData: true}, {Force: true, DeleteEmptyDirData: true}} {
		for _, tc := range filterCases {
			t.Run(tc.name, func(t *testing.T) {
				ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner"}}
				clientset := fake.NewClientset([]runtime.Object{tc.pod.DeepCopy(), ds}...)
				helper := &kubectldrain.Helper{Ctx: context.Background(), Client: clientset, Force: opts.Force,
					DeleteEmptyDirData: opts.DeleteEmptyDirData, IgnoreAllDaemonSets: true}
				list, errs := helper.GetPodsForDeletion("node-1")
				want := "stay"
				switch {
				case len(errs) > 0:
					want = "block"
				case len(list.Pods()) == 1:
					want = "evict"
				}
				evict, blocked := Filter([]*corev1.Pod{tc.pod}, opts)
				if got := verdictOf(evict, blocked, tc.pod.Name); got != want {
					t.Errorf("%+v: Filter says %s, kubectl drain %s (%v)", opts, got, want, errs)
				}
			})
		}
	}
}

// TestFilterWhereItDiffersFromKubectl: the three cases the agent judges
// otherwise, each for a reason of its own (Filter's comment).
func TestFilterWhereItDiffersFromKubectl(t *testing.T) {
	terminating := pod("leaving", func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now })
	orphan := pod("orphan", ownedBy("DaemonSet", "apps/v1"))
	done := pod("done", finished)
	evict, blocked := Filter([]*corev1.Pod{terminating, orphan, done}, contract.DrainOptions{})
	if got := []string{verdictOf(evict, blocked, "leaving"), verdictOf(evict, blocked, "orphan"), verdictOf(evict, blocked, "done")}; !reflect.DeepEqual(got, []string{"evict", "stay", "stay"}) {
		t.Errorf("terminating bare pod, orphaned DaemonSet pod, finished pod: %v; want evict (awaited), stay, stay", got)
	}
}

func TestFilterNamesWhatWouldBeLost(t *testing.T) {
	pods := []*corev1.Pod{pod("web", ownedBy("ReplicaSet", "apps/v1")), pod("scratch", withEmptyDir), pod("bare")}
	evict, blocked := Filter(pods, contract.DrainOptions{})
	if len(evict) != 1 || evict[0].Name != "web" {
		t.Errorf("evict %v, want web alone", evict)
	}
	if got := BlockedNames(blocked); !reflect.DeepEqual(got, []string{"default/bare", "default/scratch"}) {
		t.Fatalf("blocked %v", got)
	}
	text := DescribeBlocked(blocked)
	for _, want := range []string{"default/bare (no controller recreates it (kubectl drain --force; " + contract.DrainForceAnnotation + "))",
		"default/scratch (its emptyDir data would be lost (kubectl drain --delete-emptydir-data; " + contract.DrainDeleteEmptyDirDataAnnotation + "), and no controller recreates it"} {
		if !strings.Contains(text, want) {
			t.Errorf("%q lacks %q", text, want)
		}
	}
	evict, blocked = Filter(pods, contract.DrainOptions{Force: true, DeleteEmptyDirData: true})
	if len(evict) != 3 || len(blocked) != 0 {
		t.Errorf("with both switches: evict %d, blocked %v", len(evict), blocked)
	}
}
