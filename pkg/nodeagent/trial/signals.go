package trial

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// NodeSignals says what of the Node and its pods judges a trial, besides
// the kubelet's /healthz. Each signal compares the latest Snapshot with the
// one taken just before the kubelet's restart, so that a node already in
// trouble does not fail a configuration for what it had before.
type NodeSignals struct {
	// Ready: the Node's Ready condition, True before the restart, may be
	// other than True for at most ReadyGrace at a time during the trial;
	// the first such stretch is counted from the restart.
	Ready      bool
	ReadyGrace time.Duration
	// PressureConditions are the conditions (MemoryPressure, ...) whose
	// change to True fails the trial. Empty turns the signal off.
	PressureConditions []corev1.NodeConditionType
	// PodFailureReasons are the status.reason values of Failed pods that
	// fail the trial when the kubelet gave them after the restart; "X*"
	// matches every reason starting with X. Empty turns the signal off.
	PodFailureReasons []string
	// PodsStopped: a pod with restartPolicy Always that was not over
	// before the restart and is over now (Succeeded or Failed) with no
	// reason, without being deleted, fails the trial. Only the kubelet
	// ends such a pod: a running pod it rejects at admission after a
	// restart is killed and then shows the phase its containers ended
	// with, and no reason (seen with kubelet v1.37.2: it logged OutOfpods
	// and wrote an Event, and the pod's status went from Running straight
	// to Succeeded).
	PodsStopped bool
	// Allocatable: the Node's allocatable cpu, memory, ephemeral-storage or
	// pods dropping below what the pods still holding resources request,
	// for AllocatableGrace (zero: at once), fails the trial. The grace lets
	// the restarted kubelet reject the pods it has no room for first: its
	// rejections name the pods and its reason, and once the pods are over
	// there is no shortfall left. A shortfall that outlasts it is pods the
	// kubelet admitted against the Node status it read before reporting
	// its own.
	Allocatable      bool
	AllocatableGrace time.Duration
}

// DefaultPressureConditions are the Node's pressure conditions, all set
// by the kubelet's eviction manager from its eviction thresholds.
var DefaultPressureConditions = []corev1.NodeConditionType{
	corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure,
}

// DefaultPodFailureReasons are the reasons the kubelet itself gives a pod
// it fails without running it to completion: admission refusals
// (OutOfcpu, OutOfmemory, OutOfpods, OutOf<extended resource>,
// UnexpectedAdmissionError, NodeAffinity, TopologyAffinityError from the
// topology manager, SMTAlignmentError from the static CPU manager) and
// evictions (Evicted by the eviction manager, Preempting for a critical
// pod). Each of them can follow from the kubelet's configuration.
var DefaultPodFailureReasons = []string{
	"OutOf*", "Evicted", "Preempting", "UnexpectedAdmissionError", "NodeAffinity",
	"TopologyAffinityError", "SMTAlignmentError",
}

// evictionReasons are the reasons of pods the kubelet evicted rather than
// refused at admission; only the wording of the message differs.
var evictionReasons = []string{"Evicted", "Preempting"}

// allocatableResources are the resources the allocatable signal watches:
// the ones a kubelet's configuration changes (reservations, eviction
// thresholds, maxPods). Extended resources are left out: device plugins
// register again after every kubelet restart, and their allocatable is
// zero until they do.
var allocatableResources = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods,
}

// ReadsPods reports whether a signal needs the pods bound to the Node.
func (s NodeSignals) ReadsPods() bool {
	return len(s.PodFailureReasons) > 0 || s.PodsStopped || s.Allocatable
}

// Validate reports settings that cannot be used.
func (s NodeSignals) Validate() error {
	var errs []error
	if s.Ready && s.ReadyGrace <= 0 {
		errs = append(errs, fmt.Errorf("Ready grace period %v: must be positive", s.ReadyGrace))
	}
	if s.AllocatableGrace < 0 {
		errs = append(errs, fmt.Errorf("allocatable grace period %v: must not be negative", s.AllocatableGrace))
	}
	for _, c := range s.PressureConditions {
		if !slices.Contains(DefaultPressureConditions, c) {
			errs = append(errs, fmt.Errorf("pressure condition %q: want one of %v", c, DefaultPressureConditions))
		}
	}
	for _, r := range s.PodFailureReasons {
		if strings.TrimSuffix(r, "*") == "" || strings.ContainsAny(strings.TrimSuffix(r, "*"), "* ,") {
			errs = append(errs, fmt.Errorf("pod failure reason %q: want a reason, or a prefix followed by *", r))
		}
	}
	return errors.Join(errs...)
}

// NotReady says whether s shows the Node other than Ready, and how.
func NotReady(s Snapshot) (bool, string) {
	c, ok := s.Conditions[corev1.NodeReady]
	if !ok {
		return true, "no Ready condition"
	}
	if c.Status == corev1.ConditionTrue {
		return false, ""
	}
	return true, describeCondition(corev1.NodeReady, c)
}

// RaisedPressure returns the conditions among watched that are True now
// and were not before, described.
func RaisedPressure(before, now Snapshot, watched []corev1.NodeConditionType) []string {
	var raised []string
	for _, t := range watched {
		c, ok := now.Conditions[t]
		if !ok || c.Status != corev1.ConditionTrue {
			continue
		}
		if b, ok := before.Conditions[t]; ok && b.Status == corev1.ConditionTrue {
			continue
		}
		raised = append(raised, describeCondition(t, c))
	}
	return raised
}

// PodFailure is a pod the kubelet failed during the trial.
type PodFailure struct {
	Pod
	// Evicted is true for an eviction, false for an admission refusal.
	Evicted bool
	// Stopped is true for a pod that is over without a reason to say why
	// (StoppedPods).
	Stopped bool
}

func (f PodFailure) String() string {
	if f.Stopped {
		return fmt.Sprintf("pod %s/%s stopped by the kubelet: %s with restartPolicy Always, not deleted", f.Namespace, f.Name, f.Phase)
	}
	verb := "rejected"
	if f.Evicted {
		verb = "evicted"
	}
	s := fmt.Sprintf("pod %s/%s %s by the kubelet: %s", f.Namespace, f.Name, verb, f.Reason)
	if f.Message != "" {
		s += ": " + f.Message
	}
	return s
}

// FailedPods returns the pods that are Failed now with one of reasons and
// were not Failed before (pods bound since are included: the kubelet
// judged them by the new configuration too), ordered by namespace and
// name. Nothing is returned unless both snapshots know the pods.
func FailedPods(before, now Snapshot, reasons []string) []PodFailure {
	if !before.PodsKnown || !now.PodsKnown {
		return nil
	}
	var failed []PodFailure
	for uid, p := range now.Pods {
		if p.Phase != corev1.PodFailed || !matchesReason(p.Reason, reasons) {
			continue
		}
		if b, ok := before.Pods[uid]; ok && b.Phase == corev1.PodFailed {
			continue
		}
		failed = append(failed, PodFailure{Pod: p, Evicted: slices.Contains(evictionReasons, p.Reason)})
	}
	sortPods(failed)
	return failed
}

// StoppedPods returns the pods with restartPolicy Always that are over now
// with no reason given, were known and not over before, and are not being
// deleted, ordered by namespace and name. A pod over with a reason is
// FailedPods' to judge by that reason (DeadlineExceeded, say, is the pod's
// own doing). Nothing is returned unless both snapshots know the pods.
func StoppedPods(before, now Snapshot) []PodFailure {
	if !before.PodsKnown || !now.PodsKnown {
		return nil
	}
	var stopped []PodFailure
	for uid, p := range now.Pods {
		if !p.RestartAlways || !p.Terminal() || p.Deleting || p.Reason != "" {
			continue
		}
		if b, ok := before.Pods[uid]; !ok || b.Terminal() {
			continue
		}
		stopped = append(stopped, PodFailure{Pod: p, Stopped: true})
	}
	sortPods(stopped)
	return stopped
}

// DescribeStopped says which pods the kubelet stopped, and why as far as
// now shows: such a pod's status keeps no reason, but when the pods still
// holding resources and the stopped ones together request more of a
// resource than the Node's allocatable, the kubelet's admission refused
// them for it, and its reason is OutOf<resource>.
func DescribeStopped(stopped []PodFailure, now Snapshot) string {
	if len(stopped) == 0 {
		return ""
	}
	var names []string
	for i, f := range stopped {
		if i == maxNamedPods {
			names = append(names, fmt.Sprintf("%d more", len(stopped)-maxNamedPods))
			break
		}
		names = append(names, f.Namespace+"/"+f.Name)
	}
	noun := "pod"
	if len(stopped) > 1 {
		noun = "pods"
	}
	s := fmt.Sprintf("%s %s stopped by the kubelet (%s, restartPolicy Always, not deleted)", noun, strings.Join(names, ", "), stopped[0].Phase)
	// As the kubelet's admission counts them: the stopped pods as if they
	// still held what they request.
	together := maps.Clone(now.Pods)
	for _, f := range stopped {
		for uid, p := range together {
			if p.Namespace == f.Namespace && p.Name == f.Name {
				p.Phase = corev1.PodRunning
				together[uid] = p
			}
		}
	}
	for _, name := range allocatableResources {
		have, ok := now.Allocatable[name]
		if !ok {
			continue
		}
		if want := requested(together, name); want.Cmp(have) > 0 {
			return fmt.Sprintf("%s: OutOf%s, as the kubelet rejects at admission: with them the Node's pods request %s %s, its allocatable is %s",
				s, name, want.String(), name, have.String())
		}
	}
	return s + ": a running pod the kubelet rejects at admission ends so; the pods' Events give the reason"
}

func sortPods(pods []PodFailure) {
	slices.SortFunc(pods, func(a, b PodFailure) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

func matchesReason(reason string, reasons []string) bool {
	if reason == "" {
		return false
	}
	for _, r := range reasons {
		if prefix, ok := strings.CutSuffix(r, "*"); ok {
			if strings.HasPrefix(reason, prefix) {
				return true
			}
		} else if reason == r {
			return true
		}
	}
	return false
}

// AllocatableShortfall returns, described, each watched resource whose
// allocatable dropped since before and is now below what the pods holding
// resources request, where it was not below before. Nothing is returned
// unless now knows the pods.
func AllocatableShortfall(before, now Snapshot) []string {
	if !now.PodsKnown {
		return nil
	}
	var short []string
	for _, name := range allocatableResources {
		was, okBefore := before.Allocatable[name]
		is, okNow := now.Allocatable[name]
		if !okBefore || !okNow || is.Cmp(was) >= 0 {
			continue
		}
		want := requested(now.Pods, name)
		if want.Cmp(is) <= 0 || want.Cmp(was) > 0 {
			continue
		}
		short = append(short, fmt.Sprintf("the Node's allocatable %s dropped from %s to %s, below the %s its pods request",
			name, was.String(), is.String(), want.String()))
	}
	return short
}

func describeCondition(t corev1.NodeConditionType, c Condition) string {
	s := fmt.Sprintf("%s=%s", t, c.Status)
	if c.Reason != "" {
		s += " " + c.Reason
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}
