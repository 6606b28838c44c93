package disruption

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// Need says what a change needs.
type Need string

const (
	// NeedRestart is a change a kubelet restart carries: pods keep running.
	NeedRestart Need = "Restart"
	// NeedDrain is a change the kubelet cannot take with pods on the node:
	// it would refuse to start, or reject pods already running, or leave
	// them under state it no longer understands.
	NeedDrain Need = "Drain"
)

// Plan is what a change from one configuration to another needs.
type Plan struct {
	// Drain is true when the node must be drained before the kubelet
	// restarts with the new configuration.
	Drain bool
	// StateFiles are the kubelet's state files (names relative to its root
	// directory, e.g. "cpu_manager_state") the change invalidates, to remove
	// while the kubelet is stopped; sorted, unique. Only ever names from a
	// fixed list in this package (StateFiles), never from input.
	StateFiles []string
	// Reasons say, one per field that needs the drain and in field-name
	// order, why: e.g. `cpuManagerPolicy: "none" -> "static" (removes
	// cpu_manager_state)`, `maxPods: 110 -> 20 shrinks what the node holds`.
	Reasons []string
}

// Classify compares two configurations as the kubelet would run them. Fields
// left unset count as the kubelet's default (so "" and "none"
// cpuManagerPolicy are the same, maxPods 0 and 110 the same, etc.). A nil
// side means the kubelet's defaults. Neither configuration is modified.
//
// A Plan without Drain means a restart carries the change (or nothing
// changed at all: Classify does not say which; kubeletconfig.Diff does).
func Classify(from, to *kubeletconfigv1beta1.KubeletConfiguration) Plan {
	c := change{from: newView(from), to: newView(to), findings: map[string]*finding{}}
	for _, rule := range rules {
		rule(&c)
	}
	return c.plan()
}

// ClassifyFiles decodes two kubelet configuration files (YAML or JSON
// KubeletConfiguration; empty or nil data means defaults, i.e. nothing set)
// and classifies the change. It decodes leniently, as the kubelet does: an
// unknown field is ignored (whether to allow it is judged elsewhere, by
// kubeletconfig.Decode), but data that is not a KubeletConfiguration at all
// is an error.
func ClassifyFiles(from, to []byte) (Plan, error) {
	fromConfig, err := DecodeLenient(from)
	if err != nil {
		return Plan{}, fmt.Errorf("the old configuration: %w", err)
	}
	toConfig, err := DecodeLenient(to)
	if err != nil {
		return Plan{}, fmt.Errorf("the new configuration: %w", err)
	}
	return Classify(fromConfig, toConfig), nil
}

// loadLenientDecoder builds, once, a decoder that behaves like the kubelet's
// fallback decoder (pkg/kubelet/kubeletconfig/util/codec): YAML or JSON,
// apiVersion and kind required, unknown and duplicate fields tolerated.
var loadLenientDecoder = sync.OnceValues(func() (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	if err := kubeletconfigv1beta1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering %s: %w", kubeletconfigv1beta1.SchemeGroupVersion, err)
	}
	options := serializerjson.SerializerOptions{Yaml: true}
	return serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, scheme, scheme, options), nil
})

// decodeLenient returns nil, meaning the kubelet's defaults, for empty data.
func DecodeLenient(data []byte) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	if len(data) > kubeletconfig.MaxConfigBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", kubeletconfig.ErrTooLarge, len(data), kubeletconfig.MaxConfigBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	decoder, err := loadLenientDecoder()
	if err != nil {
		return nil, err
	}
	obj, gvk, err := decoder.Decode(data, nil, nil)
	// The decoder's own messages for a missing or unknown type quote the
	// whole input; say what is wrong instead.
	switch {
	case runtime.IsMissingVersion(err):
		return nil, fmt.Errorf("%w: apiVersion is missing", ErrNotKubeletConfiguration)
	case runtime.IsMissingKind(err):
		return nil, fmt.Errorf("%w: kind is missing", ErrNotKubeletConfiguration)
	case runtime.IsNotRegisteredError(err) && gvk != nil:
		return nil, fmt.Errorf("%w: apiVersion %q, kind %q", ErrNotKubeletConfiguration, gvk.GroupVersion(), gvk.Kind)
	case err != nil:
		return nil, fmt.Errorf("decoding KubeletConfiguration: %w", err)
	}
	cfg, ok := obj.(*kubeletconfigv1beta1.KubeletConfiguration)
	if !ok {
		return nil, fmt.Errorf("%w: apiVersion %q, kind %q", ErrNotKubeletConfiguration, gvk.GroupVersion(), gvk.Kind)
	}
	return cfg, nil
}

// ErrNotKubeletConfiguration is returned by ClassifyFiles for data that is
// not a kubelet.config.k8s.io/v1beta1 KubeletConfiguration.
var ErrNotKubeletConfiguration = errors.New("not a kubelet.config.k8s.io/v1beta1 KubeletConfiguration")

// change is one comparison in progress: the two sides as the kubelet runs
// them, and what the rules found, by field.
type change struct {
	from, to *view
	findings map[string]*finding
}

// finding is why one field needs the drain: what changed (one entry per
// distinct change, in the order the rules found them), what each change
// does, and the state files it invalidates.
type finding struct {
	changes []string
	effects map[string][]string
	files   []string
}

// drain records that field needs the drain because of what changed (the
// values, e.g. `110 -> 20`), which has effect (e.g. "shrinks what the node
// holds"; empty when the values say it all), and invalidates files. A field
// found more than once gets one reason: the effects of the same change are
// joined, different changes are listed one after the other.
func (c *change) drain(field, what, effect string, files ...string) {
	f := c.findings[field]
	if f == nil {
		f = &finding{effects: map[string][]string{}}
		c.findings[field] = f
	}
	effects, seen := f.effects[what]
	if !seen {
		f.changes = append(f.changes, what)
	}
	if effect != "" && !slices.Contains(effects, effect) {
		effects = append(effects, effect)
	}
	f.effects[what] = effects
	for _, file := range files {
		if !slices.Contains(f.files, file) {
			f.files = append(f.files, file)
		}
	}
}

func (c *change) plan() Plan {
	var plan Plan
	fields := make([]string, 0, len(c.findings))
	for field := range c.findings {
		fields = append(fields, field)
	}
	slices.Sort(fields)
	for _, field := range fields {
		f := c.findings[field]
		clauses := make([]string, len(f.changes))
		for i, what := range f.changes {
			clauses[i] = strings.TrimSpace(what + " " + strings.Join(f.effects[what], " and "))
		}
		reason := field + ": " + strings.Join(clauses, "; ")
		var removed []string
		for _, file := range f.files {
			// Only names from this package's fixed list ever reach a
			// Plan; a rule naming another file is a bug, and dropping
			// the name is safer than deleting what it names.
			if isRemovable(file) {
				removed = append(removed, file)
			}
		}
		if len(removed) > 0 {
			slices.Sort(removed)
			reason += " (removes " + strings.Join(removed, ", ") + ")"
			plan.StateFiles = append(plan.StateFiles, removed...)
		}
		plan.Reasons = append(plan.Reasons, reason)
	}
	plan.Drain = len(plan.Reasons) > 0
	slices.Sort(plan.StateFiles)
	plan.StateFiles = slices.Compact(plan.StateFiles)
	return plan
}
