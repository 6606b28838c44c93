package effective

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Difference is a field a configuration sets that the kubelet runs with
// another value.
type Difference struct {
	// Field is the field's path, as the kubelet's validation names it:
	// maxPods, evictionHard[memory.available], logging.format.
	Field string
	// Asked and Running are the two values, JSON; Running is "unset" when
	// the kubelet runs the field unset.
	Asked, Running string
	// Source says what set the running value, where the agent can tell:
	// a flag on the kubelet's command line, a drop-in merged after the
	// agent's file, the agent's own file changed behind its back.
	Source string
}

// String is the difference in words: `maxPods: 50 asked, 20 running (set
// by the kubelet's command line: --max-pods=20)`.
func (d Difference) String() string {
	s := fmt.Sprintf("%s: %s asked, %s running", d.Field, d.Asked, d.Running)
	if d.Source != "" {
		s += " (" + d.Source + ")"
	}
	return s
}

// maxDescribed bounds how many differences Describe names; the rest are
// counted.
const maxDescribed = 5

// Describe joins differences into one sentence for a status message.
func Describe(diffs []Difference) string {
	parts := make([]string, 0, maxDescribed+1)
	for i, d := range diffs {
		if i == maxDescribed {
			parts = append(parts, fmt.Sprintf("and %d more", len(diffs)-maxDescribed))
			break
		}
		parts = append(parts, d.String())
	}
	return strings.Join(parts, "; ")
}

// Compare returns, sorted by field, the fields the configuration asked
// (YAML or JSON; a KubeletConfiguration) sets, apart from those named in
// skip (top-level fields: the node-local ones), that the kubelet runs with
// another value, as obs.Config says. Both sides are normalised as the
// kubelet normalises them (see the package documentation); a field asked
// at its zero value whose default this package does not know is left out
// rather than guessed. obs tells the source of each difference.
func Compare(asked []byte, skip []string, obs Observed) ([]Difference, error) {
	raw, err := fieldMap(asked)
	if err != nil {
		return nil, fmt.Errorf("the configuration asked: %w", err)
	}
	for _, name := range append([]string{"apiVersion", "kind"}, skip...) {
		delete(raw, name)
	}
	wanted, err := normalized(asked, true)
	if err != nil {
		return nil, fmt.Errorf("the configuration asked: %w", err)
	}
	asIs, err := normalized(asked, false)
	if err != nil {
		return nil, fmt.Errorf("the configuration asked: %w", err)
	}
	zero, err := normalized([]byte(emptyConfiguration), false)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(obs.Config)) == 0 {
		return nil, errNoConfig
	}
	running, err := normalized(obs.Config, false)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's running configuration: %w", err)
	}
	a := attributor{obs: obs, wanted: wanted}
	var diffs []Difference
	for _, p := range leaves(raw) {
		var want any
		value, _ := lookup(raw, p)
		switch {
		case emptyCollection(value):
			// An empty map or list stays empty (no eviction thresholds,
			// no DNS servers); the typed form just does not write it.
			want = value
		case isZero(asIs, zero, p):
			// The kubelet takes a field at its zero value as unset and
			// defaults it: compare with the default where it is known,
			// rather than guess.
			d, _ := lookup(wanted, p)
			if z, _ := lookup(zero, p); sameValue(d, z) {
				continue
			}
			want = d
		default:
			want, _ = lookup(asIs, p)
		}
		got, present := lookup(running, p)
		if sameValue(want, got) || rewritten(p, running) {
			continue
		}
		d := Difference{Field: p.String(), Asked: show(want, true), Running: show(got, present)}
		d.Source = a.source(p, got, present)
		diffs = append(diffs, d)
	}
	return diffs, nil
}

// emptyConfiguration is a configuration with nothing set: its typed form
// holds each field's zero value.
const emptyConfiguration = `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration"}`

// isZero reports whether the typed configuration holds its zero value at p,
// which the kubelet reads as unset: an omitted field, 0s, "" (a map's
// entries and a pointer set to zero are values, not zero).
func isZero(asIs, zero map[string]any, p path) bool {
	v, ok := lookup(asIs, p)
	z, zok := lookup(zero, p)
	return ok == zok && (!ok || sameValue(v, z))
}

// rewritten reports the fields the kubelet overwrites at start-up, so that
// what a file asked there never runs as asked: a non-empty
// reservedSystemCPUs replaces the cpu reservations.
func rewritten(p path, running map[string]any) bool {
	if len(p.segments) != 2 || p.segments[1] != "cpu" || (p.segments[0] != "kubeReserved" && p.segments[0] != "systemReserved") {
		return false
	}
	cpus, _ := running["reservedSystemCPUs"].(string)
	return strings.TrimSpace(cpus) != ""
}

func emptyCollection(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// sameValue compares two decoded values; absent, null, an empty map and
// an empty list are all the same nothing (the typed configuration writes
// none of them).
func sameValue(a, b any) bool {
	if isNothing(a) || isNothing(b) {
		return isNothing(a) && isNothing(b)
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func isNothing(v any) bool { return v == nil || emptyCollection(v) }

// show writes a value for a message: JSON, "unset" when absent.
func show(v any, present bool) string {
	if !present || isNothing(v) {
		if m, ok := v.(map[string]any); ok && m != nil {
			return "{}"
		}
		if l, ok := v.([]any); ok && l != nil {
			return "[]"
		}
		return "unset"
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// text is a scalar value as a flag writes it: a string bare, a number or
// a boolean as JSON, a list of them comma-separated; "" for anything else.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return fmt.Sprint(v)
	case []any:
		parts := make([]string, 0, len(v))
		for _, item := range v {
			t := text(item)
			if t == "" {
				return ""
			}
			parts = append(parts, t)
		}
		return strings.Join(parts, ",")
	}
	return ""
}

// flagShows reports whether a flag's value, as /flagz shows it, is the
// running value at p: the value itself, or for a map key the entry
// KEY=VALUE (KEY<VALUE for eviction thresholds, KEY:VALUE for headers)
// among the flag's comma-separated entries.
func flagShows(flagValue string, p path, running any) bool {
	t := text(running)
	if t == "" {
		return false
	}
	want := []string{t}
	if n := len(p.segments); n > 0 && p.keys[n-1] {
		k := p.segments[n-1]
		want = []string{k + "=" + t, k + "<" + t, k + ":" + t}
	}
	entries := append([]string{flagValue}, strings.Split(flagValue, ",")...)
	for _, entry := range entries {
		if slices.Contains(want, strings.TrimSpace(entry)) {
			return true
		}
	}
	return false
}

// flagFor is the kubelet flag that sets the field at p, "" when none does.
func flagFor(p path) string {
	for _, prefix := range p.fieldPrefixes() {
		if flag, ok := kubeletFlags[prefix]; ok {
			return flag
		}
	}
	return ""
}
