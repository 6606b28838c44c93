package kubeletconfig

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Diff returns the top-level fields, by their JSON names and in sorted order,
// whose values differ between two configurations, so that a caller can refuse
// changes to fields the settings forbid to change dynamically
// (forbiddenDynamicFields). A nil
// configuration counts as an empty one.
//
// Values are compared semantically (quantities by value, a nil map or list
// equal to an empty one) but without defaults: setting a field to the value
// the kubelet would default it to is a change. apiVersion and kind count as
// fields.
func Diff(old, updated *kubeletconfigv1beta1.KubeletConfiguration) []string {
	empty := &kubeletconfigv1beta1.KubeletConfiguration{}
	if old == nil {
		old = empty
	}
	if updated == nil {
		updated = empty
	}
	var changed []string
	collectChanges(reflect.ValueOf(old).Elem(), reflect.ValueOf(updated).Elem(), &changed)
	slices.Sort(changed)
	return changed
}

// collectChanges walks the fields of two structs of the same type, descending
// into inlined structs (TypeMeta) so their members count as top-level.
func collectChanges(old, updated reflect.Value, changed *[]string) {
	structType := old.Type()
	for i := range structType.NumField() {
		fieldType := structType.Field(i)
		name, inline := jsonName(fieldType)
		switch {
		case name == "-" || !fieldType.IsExported():
		case inline && fieldType.Type.Kind() == reflect.Struct:
			collectChanges(old.Field(i), updated.Field(i), changed)
		case !apiequality.Semantic.DeepEqual(old.Field(i).Interface(), updated.Field(i).Interface()):
			*changed = append(*changed, name)
		}
	}
}

func jsonName(fieldType reflect.StructField) (name string, inline bool) {
	tag := fieldType.Tag.Get("json")
	name, options, _ := strings.Cut(tag, ",")
	inline = fieldType.Anonymous || slices.Contains(strings.Split(options, ","), "inline")
	if name == "" {
		name = fieldType.Name
	}
	return name, inline
}

// IsTopLevelField reports whether name is the JSON name of a top-level
// KubeletConfiguration field, as Diff reports them.
func IsTopLevelField(name string) bool {
	_, ok := topLevelFields()[name]
	return ok
}

var topLevelFields = sync.OnceValue(func() map[string]struct{} {
	fields := map[string]struct{}{}
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, inline := jsonName(f)
			switch {
			case name == "-" || !f.IsExported():
			case inline && f.Type.Kind() == reflect.Struct:
				collect(f.Type)
			default:
				fields[name] = struct{}{}
			}
		}
	}
	collect(reflect.TypeFor[kubeletconfigv1beta1.KubeletConfiguration]())
	return fields
})
