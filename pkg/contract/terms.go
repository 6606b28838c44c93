package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// DrainOptions are `kubectl drain`'s two switches for pods whose deletion
// loses something: without them such pods block a drain, which then
// changes nothing.
type DrainOptions struct {
	// force lets the drain evict pods no controller recreates (kubectl
	// drain --force): such a pod is gone for good.
	// +optional
	Force bool `json:"force,omitempty"`
	// deleteEmptyDirData lets the drain evict pods with emptyDir volumes
	// (kubectl drain --delete-emptydir-data): their data is gone for good.
	// +optional
	DeleteEmptyDirData bool `json:"deleteEmptyDirData,omitempty"`
}

// DrainOptionsOf reads the drain switches a Node's annotations give. A
// value other than "true" or "false" is an error and counts as "false":
// a drain deletes nothing it was not plainly told it may.
func DrainOptionsOf(annotations map[string]string) (DrainOptions, error) {
	var o DrainOptions
	var errs []error
	for key, field := range map[string]*bool{DrainForceAnnotation: &o.Force, DrainDeleteEmptyDirDataAnnotation: &o.DeleteEmptyDirData} {
		value, ok := annotations[key]
		switch {
		case !ok || value == "false":
		case value == "true":
			*field = true
		default:
			errs = append(errs, fmt.Errorf("%s=%q: want \"true\" or \"false\"", key, value))
		}
	}
	return o, errors.Join(errs...)
}

// Annotations are the Node annotations that give o, for a merge patch: nil
// removes a switch that is off.
func (o DrainOptions) Annotations() map[string]*string {
	value := func(on bool) *string {
		if !on {
			return nil
		}
		s := "true"
		return &s
	}
	return map[string]*string{DrainForceAnnotation: value(o.Force), DrainDeleteEmptyDirDataAnnotation: value(o.DeleteEmptyDirData)}
}

// TrialTerms are the terms of a configuration's trial where they differ
// from the agent's flags: its period, which signals of the Node and its
// pods judge it (the kubelet's health always does), and whether the change
// may shrink what the Node holds. Whatever is left out is the agent's.
type TrialTerms struct {
	// periodSeconds is how long the configuration is on trial (the agent's
	// --trial-period when unset). A rollout also counts a Node it assigned
	// updated no sooner than this long after the assignment.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	PeriodSeconds *int32 `json:"periodSeconds,omitempty"`
	// signals turns the trial's signals of the Node and its pods on or off;
	// each left out is as the agent's flags say.
	// +optional
	Signals *TrialSignals `json:"signals,omitempty"`
	// allowShrink says the change is meant to shrink what the Node holds:
	// after a drain, the trial does not fail when the pods the Node ran
	// before no longer fit its allocatable, and the status says the check
	// was waived and what it found.
	// +optional
	AllowShrink bool `json:"allowShrink,omitempty"`
}

// TrialSignals turn the trial's signals of the Node and its pods on or off
// (docs/agent.md, "The Node and its workloads"); nil leaves a signal as the
// agent's flags have it. A signal turned on keeps the agent's tuning (its
// grace periods and lists), and none that reads pods is turned on on an
// agent told not to read them (--trial-read-pods=false).
type TrialSignals struct {
	// nodeReady: the Node must be Ready again after the restart and stay so
	// (--trial-node-ready).
	// +optional
	NodeReady *bool `json:"nodeReady,omitempty"`
	// pressure: a pressure condition raised during the trial fails it
	// (--trial-pressure).
	// +optional
	Pressure *bool `json:"pressure,omitempty"`
	// podFailures: a pod the kubelet rejects or evicts during the trial
	// fails it (--trial-pod-failure-reasons).
	// +optional
	PodFailures *bool `json:"podFailures,omitempty"`
	// podsStopped: a running pod the kubelet stops during the trial fails
	// it (--trial-pods-stopped).
	// +optional
	PodsStopped *bool `json:"podsStopped,omitempty"`
	// allocatable: an allocatable that drops below what the running pods
	// request fails the trial (--trial-allocatable).
	// +optional
	Allocatable *bool `json:"allocatable,omitempty"`
}

// maxTrialSeconds bounds a trial's period: a day.
const maxTrialSeconds = 86400

// Validate reports terms no trial can be judged by.
func (t *TrialTerms) Validate() error {
	if t == nil || t.PeriodSeconds == nil {
		return nil
	}
	if p := *t.PeriodSeconds; p < 1 || p > maxTrialSeconds {
		return fmt.Errorf("periodSeconds %d: want 1 to %d", p, maxTrialSeconds)
	}
	return nil
}

// IsZero reports terms that say nothing: the agent's flags rule.
func (t *TrialTerms) IsZero() bool {
	return t == nil || (t.PeriodSeconds == nil && !t.AllowShrink &&
		(t.Signals == nil || *t.Signals == TrialSignals{}))
}

// TrialTermsOf reads TrialAnnotation from a Node's annotations: nil when
// absent or empty. A value that does not decode strictly, or that
// Validate refuses, is an error.
func TrialTermsOf(annotations map[string]string) (*TrialTerms, error) {
	raw, ok := annotations[TrialAnnotation]
	if !ok || raw == "" {
		return nil, nil
	}
	decoder := json.NewDecoder(bytes.NewReader([]byte(raw)))
	decoder.DisallowUnknownFields()
	var t TrialTerms
	if err := decoder.Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %w", TrialAnnotation, err)
	}
	if decoder.More() {
		return nil, fmt.Errorf("%s: more than one JSON value", TrialAnnotation)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", TrialAnnotation, err)
	}
	return &t, nil
}

// Annotation is TrialAnnotation's value for t, nil (removed) for terms that
// say nothing.
func (t *TrialTerms) Annotation() (*string, error) {
	if t.IsZero() {
		return nil, nil
	}
	data, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", TrialAnnotation, err)
	}
	s := string(data)
	return &s, nil
}

// DeepCopyInto copies t into out (generated deep copies of the types that
// hold TrialTerms call it).
func (t *TrialTerms) DeepCopyInto(out *TrialTerms) {
	*out = *t
	if t.PeriodSeconds != nil {
		p := *t.PeriodSeconds
		out.PeriodSeconds = &p
	}
	if t.Signals != nil {
		out.Signals = t.Signals.DeepCopy()
	}
}

// DeepCopy copies t.
func (t *TrialTerms) DeepCopy() *TrialTerms {
	if t == nil {
		return nil
	}
	out := new(TrialTerms)
	t.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies s into out.
func (s *TrialSignals) DeepCopyInto(out *TrialSignals) {
	*out = TrialSignals{}
	for _, f := range []struct{ from, to **bool }{
		{&s.NodeReady, &out.NodeReady}, {&s.Pressure, &out.Pressure}, {&s.PodFailures, &out.PodFailures},
		{&s.PodsStopped, &out.PodsStopped}, {&s.Allocatable, &out.Allocatable},
	} {
		if *f.from != nil {
			v := **f.from
			*f.to = &v
		}
	}
}

// DeepCopy copies s.
func (s *TrialSignals) DeepCopy() *TrialSignals {
	if s == nil {
		return nil
	}
	out := new(TrialSignals)
	s.DeepCopyInto(out)
	return out
}
