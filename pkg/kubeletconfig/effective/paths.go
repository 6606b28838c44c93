package effective

import (
	"reflect"
	"slices"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// path is where a value sits in a configuration: field names, and map keys
// where the configuration's type has a map (evictionHard, featureGates, ...).
type path struct {
	segments []string
	// keys[i] is true when segments[i] is a map key.
	keys []bool
}

func (p path) child(segment string, key bool) path {
	return path{segments: append(slices.Clone(p.segments), segment), keys: append(slices.Clone(p.keys), key)}
}

// String writes the path as the kubelet's validation names fields:
// evictionHard[memory.available], logging.format.
func (p path) String() string {
	var b strings.Builder
	for i, s := range p.segments {
		switch {
		case p.keys[i]:
			b.WriteString("[" + s + "]")
		case i > 0:
			b.WriteString("." + s)
		default:
			b.WriteString(s)
		}
	}
	return b.String()
}

// fieldPrefixes are the dot-joined field names of the path before its first
// map key, longest first: what a flag can set.
func (p path) fieldPrefixes() []string {
	var fields []string
	for i, s := range p.segments {
		if p.keys[i] {
			break
		}
		fields = append(fields, s)
	}
	var out []string
	for n := len(fields); n > 0; n-- {
		out = append(out, strings.Join(fields[:n], "."))
	}
	return out
}

var configurationType = reflect.TypeFor[kubeletconfigv1beta1.KubeletConfiguration]()

// leaves lists the paths a configuration's fields set, walking them with
// the configuration's type: a struct's fields and a map's keys are
// descended into, each key on its own, since the kubelet merges drop-ins
// and flags (feature gates) into maps key by key; a list, a scalar, an
// empty map and a value of unknown type are one leaf each. Sorted.
func leaves(fields map[string]any) []path {
	var out []path
	walk(path{}, fields, configurationType, &out)
	slices.SortFunc(out, func(a, b path) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func walk(p path, value any, t reflect.Type, out *[]path) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	m, isMap := value.(map[string]any)
	switch {
	case len(p.segments) == 0 && len(m) == 0:
		// Nothing set at all.
	case !isMap || len(m) == 0 || t == nil:
		*out = append(*out, p)
	case t.Kind() == reflect.Struct:
		for name, v := range m {
			var ft reflect.Type
			if f, ok := jsonField(t, name); ok {
				ft = f.Type
			}
			walk(p.child(name, false), v, ft, out)
		}
	case t.Kind() == reflect.Map:
		for key, v := range m {
			walk(p.child(key, true), v, t.Elem(), out)
		}
	default:
		*out = append(*out, p)
	}
}

// jsonField finds the struct field whose JSON name is name, looking into
// embedded structs (TypeMeta).
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			if inner, ok := jsonField(f.Type, name); ok {
				return inner, true
			}
			continue
		}
		if tag == name && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// lookup returns the value at p in decoded fields.
func lookup(fields map[string]any, p path) (any, bool) {
	var current any = fields
	for _, s := range p.segments {
		m, ok := current.(map[string]any)
		if !ok {
			return nil, false
		}
		if current, ok = m[s]; !ok {
			return nil, false
		}
	}
	return current, true
}

// sets reports whether a file's fields decide the value at p when merged
// as a JSON merge patch: they hold it, or replace one of the maps it sits
// in with something else (null included).
func sets(fields map[string]any, p path) bool {
	var current any = fields
	for _, s := range p.segments {
		m, ok := current.(map[string]any)
		if !ok {
			return true
		}
		if current, ok = m[s]; !ok {
			return false
		}
	}
	return true
}
