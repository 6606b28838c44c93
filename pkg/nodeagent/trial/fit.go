package trial

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/podfit"
)

// AfterDrain is what a trial that follows a drain also judges: whether the
// Node can take back the pods it ran before the drain. Judged on an
// emptied Node, the other signals cannot see that a change left it room
// for fewer pods, or less cpu or memory, than it held; this signal holds
// the change to what the Node held.
type AfterDrain struct {
	// Requests are what each pod the Node ran before the drain requests,
	// the DaemonSet and mirror pods that stayed included (pkg/podfit).
	Requests []corev1.ResourceList
	// AllowShrink waives the check: the change is meant to shrink the
	// Node. The check still looks, and Waived says what it found.
	AllowShrink bool
}

// fitCheck is the part of a Tracker that judges AfterDrain.
type fitCheck struct {
	held *AfterDrain
	// shortSince is, for each resource seen short at every look since,
	// when it was first seen so (time since boot).
	shortSince map[corev1.ResourceName]time.Duration
	// finding is what the last look found, in words.
	finding string
}

// SetAfterDrain makes the trial judge whether the Node can take back the
// pods it ran before a drain: they must fit its allocatable, as the
// scheduler fits pods, once the restarted kubelet reports it. A shortfall
// fails the trial once it has lasted the allocatable signal's grace
// (NodeSignals.AllocatableGrace, whether that signal is on or not), or,
// for an extended resource, the kubelet's grace (Terms.Grace): device
// plugins register again after a restart, and their resources are zero
// until they do. Meanwhile the trial does not pass.
func (t *Tracker) SetAfterDrain(a AfterDrain) {
	t.node.fit = fitCheck{held: &a, shortSince: map[corev1.ResourceName]time.Duration{}}
}

// Waived says, when the after-drain check was waived (AllowShrink), what
// its last look found; "" otherwise.
func (t *Tracker) Waived() string {
	f := t.node.fit
	if f.held == nil || !f.held.AllowShrink || f.finding == "" {
		return ""
	}
	return "the after-drain check was waived (allowShrink): " + f.finding
}

// observe judges s at now; failure is set when the trial fails, waiting
// while a shortfall is within its grace.
func (f *fitCheck) observe(now time.Duration, s Snapshot, grace, extendedGrace time.Duration) (failure, waiting string) {
	if f.held == nil || len(s.Allocatable) == 0 {
		return "", ""
	}
	held := len(f.held.Requests)
	short := podfit.Check(f.held.Requests, s.Allocatable)
	if len(short) == 0 {
		clear(f.shortSince)
		f.finding = fmt.Sprintf("the %s it ran before the drain fit its allocatable", pods(held))
		return "", ""
	}
	f.finding = fmt.Sprintf("the %s it ran before the drain no longer fit its allocatable: %s", pods(held), podfit.Describe(short))
	if f.held.AllowShrink {
		return "", ""
	}
	var over, within []string
	seen := map[corev1.ResourceName]bool{}
	for _, sf := range short {
		name := sf.Resource
		seen[name] = true
		since, ok := f.shortSince[name]
		if !ok {
			since = now
			f.shortSince[name] = now
		}
		g := grace
		if isExtended(name) {
			g = max(grace, extendedGrace)
		}
		if now-since >= g {
			over = append(over, string(name))
		} else {
			within = append(within, string(name))
		}
	}
	for name := range f.shortSince {
		if !seen[name] {
			delete(f.shortSince, name)
		}
	}
	if len(over) > 0 {
		return fmt.Sprintf("after the drain the Node can no longer take back the %s it ran before: %s", pods(held), podfit.Describe(short)), ""
	}
	return "", "the Node to have room again for the pods it ran before the drain (" + strings.Join(within, ", ") + ")"
}

func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// isExtended reports a resource a device plugin (or a cluster) advertises,
// not the kubelet from the machine: a name with a domain outside
// kubernetes.io, as the API's own helper tells them apart.
func isExtended(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, corev1.ResourceDefaultNamespacePrefix)
}
