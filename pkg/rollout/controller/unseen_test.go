package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

func cachedNode(name, rv string, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Annotations: annotations}}
}

// overlayAll overlays each Node.
func overlayAll(u *rolloutState, now time.Time, nodes ...*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i, node := range nodes {
		out[i] = u.overlay(node, now)
	}
	return out
}

func TestUnseenOverlaysChangesUntilTheCacheShowsThem(t *testing.T) {
	now := time.Unix(1000, 0)
	u := newRolloutState(time.Minute, 16)
	source, status := "kubelet-configs/v2", "{}"
	assignA := rollout.Change{Node: "a", ResourceVersion: "10", Annotations: map[string]*string{contract.ConfigSourceAnnotation: &source}}
	revertB := rollout.Change{Node: "b", ResourceVersion: "20", Annotations: map[string]*string{contract.ConfigSourceAnnotation: nil}}
	u.sending([]rollout.Change{assignA, revertB}, nil)

	a := cachedNode("a", "10", map[string]string{contract.ConfigStatusAnnotation: status})
	b := cachedNode("b", "20", map[string]string{contract.ConfigSourceAnnotation: "kubelet-configs/v1"})
	c := cachedNode("c", "30", nil)
	got := overlayAll(u, now, a, b, c)
	if got[0].Annotations[contract.ConfigSourceAnnotation] != source || got[0].Annotations[contract.ConfigStatusAnnotation] != status {
		t.Errorf("a in flight reads %v, want its assignment over what the cache has", got[0].Annotations)
	}
	if _, ok := got[1].Annotations[contract.ConfigSourceAnnotation]; ok {
		t.Errorf("b in flight reads %v, want its config-source removed", got[1].Annotations)
	}
	if got[2] != c {
		t.Error("a Node without a change is not the cached object")
	}
	if _, ok := a.Annotations[contract.ConfigSourceAnnotation]; ok || b.Annotations[contract.ConfigSourceAnnotation] != "kubelet-configs/v1" {
		t.Error("the overlay modified the cached objects")
	}
	if other := newRolloutState(time.Minute, 16); !u.inFlight() || other.inFlight() {
		t.Error("inFlight: want r only")
	}

	u.applied(assignA, write{produced: "11", over: []string{"10"}}, now)
	u.failed("b")
	if u.inFlight() {
		t.Error("in flight once every change was answered")
	}
	got = overlayAll(u, now, a, b)
	if got[0].ResourceVersion != "11" || got[0].Annotations[contract.ConfigSourceAnnotation] != source {
		t.Errorf("a answered reads rv %s %v, want its write's version and its assignment", got[0].ResourceVersion, got[0].Annotations)
	}
	if got[1] != b {
		t.Error("b, whose change failed, is not read as the cache has it")
	}

	shown := cachedNode("a", "12", map[string]string{contract.ConfigSourceAnnotation: "someone/else"})
	if got = overlayAll(u, now, shown); got[0] != shown {
		t.Error("a change the cache shows still overlaid")
	}
	if got = overlayAll(u, now, a); got[0] != a {
		t.Error("a change dropped once shown came back")
	}
}

func TestUnseenDropsAnswersPastTheTimeout(t *testing.T) {
	now := time.Unix(1000, 0)
	u := newRolloutState(time.Minute, 16)
	source := "kubelet-configs/v2"
	for _, name := range []string{"a", "gone"} {
		change := rollout.Change{Node: name, ResourceVersion: "10", Annotations: map[string]*string{contract.ConfigSourceAnnotation: &source}}
		u.sending([]rollout.Change{change}, nil)
		u.applied(change, write{produced: "11", over: []string{"10"}}, now)
	}
	a := cachedNode("a", "10", nil)
	if got := overlayAll(u, now.Add(59*time.Second), a); got[0] == a {
		t.Error("dropped before the timeout")
	}
	if got := overlayAll(u, now.Add(time.Minute), a); got[0] != a {
		t.Error("still overlaid at the timeout")
	}
	if touched := u.takeTouched(now.Add(time.Minute)); !touched.Has("gone") {
		t.Errorf("the unlisted Node's change dropped at the timeout is not read again: touched %v", sets.List(touched))
	}
	if n := len(u.unseen); n != 0 {
		t.Errorf("%d changes kept past the timeout, the unlisted Node's among them", n)
	}
}

// A trial-passed mark in flight holds no change of state back, and the
// marks have a window of their own, narrower than the assignments'.
func TestMarksAreNotInFlight(t *testing.T) {
	u := newRolloutState(time.Minute, DefaultMaxPatchesInFlight)
	passed := "kubelet-configs/v2@7"
	u.sending(nil, []rollout.Change{{Node: "a", ResourceVersion: "10", Annotations: map[string]*string{contract.TrialPassedAnnotation: &passed}}})
	if u.inFlight() {
		t.Error("a mark in flight counts as in flight, want only assignments and reverts")
	}
	if got := cap(u.recordSlots); got != MarksInFlight {
		t.Errorf("marks' window %d, want %d", got, MarksInFlight)
	}
	if got := cap(newRolloutState(time.Minute, 16).recordSlots); got != 16 {
		t.Errorf("marks' window %d under --max-patches-in-flight=16, want 16", got)
	}
}

// The timeout runs from a Node's latest answer: an older answer of the same
// Node, or one whose change failed and was sent again, drops nothing.
func TestUnseenTimeoutRunsFromTheLatestAnswer(t *testing.T) {
	start := time.Unix(1000, 0)
	u := newRolloutState(time.Minute, 16)
	source, passed := "kubelet-configs/v2", "kubelet-configs/v2@7"
	assign := func(node string) rollout.Change {
		return rollout.Change{Node: node, ResourceVersion: "10", Annotations: map[string]*string{contract.ConfigSourceAnnotation: &source}}
	}
	mark := rollout.Change{Node: "a", ResourceVersion: "11", Annotations: map[string]*string{contract.TrialPassedAnnotation: &passed}}

	u.sending([]rollout.Change{assign("a"), assign("b")}, nil)
	u.applied(assign("a"), write{produced: "11", over: []string{"10"}}, start)
	u.applied(assign("b"), write{produced: "12", over: []string{"10"}}, start)
	u.sending(nil, []rollout.Change{mark})
	u.applied(mark, write{produced: "13", over: []string{"11"}}, start.Add(30*time.Second))
	u.failed("b")
	u.sending([]rollout.Change{assign("b")}, nil)

	u.takeTouched(start.Add(time.Minute))
	if len(u.unseen) != 2 {
		t.Fatalf("at the first answers' timeout %d changes unseen, want a's mark and b's change in flight", len(u.unseen))
	}
	a, b := cachedNode("a", "10", nil), cachedNode("b", "10", nil)
	if got := overlayAll(u, start.Add(time.Minute), a, b); got[0] == a || got[1] == b {
		t.Error("a change dropped at the timeout of an answer it replaced")
	}
	if !u.inFlight() {
		t.Error("b's change sent again is not in flight")
	}
	if touched := u.takeTouched(start.Add(90 * time.Second)); !touched.Has("a") || touched.Has("b") {
		t.Errorf("at the mark's timeout: touched %v, want a (its mark dropped) and not b (in flight)", sets.List(touched))
	}
	if _, ok := u.unseen["a"]; ok {
		t.Error("a's mark kept past its timeout")
	}
	if len(u.answers) != 0 {
		t.Errorf("%d answers kept past every timeout", len(u.answers))
	}
}
