package disruption

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// kubeletConfigurationFields walks the json tags of KubeletConfiguration, the
// members of inlined structs (TypeMeta) counting as top-level, as the
// kubelet's decoder sees them.
func kubeletConfigurationFields(t *testing.T) []string {
	t.Helper()
	var names []string
	var walk func(reflect.Type)
	walk = func(structType reflect.Type) {
		for i := range structType.NumField() {
			f := structType.Field(i)
			name, options, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-" || !f.IsExported():
			case f.Anonymous || slices.Contains(strings.Split(options, ","), "inline"):
				walk(f.Type)
			case name == "":
				t.Fatalf("KubeletConfiguration.%s has no JSON name", f.Name)
			default:
				names = append(names, name)
			}
		}
	}
	walk(reflect.TypeFor[kubeletconfigv1beta1.KubeletConfiguration]())
	return names
}

// TestFieldsCoverKubeletConfiguration fails when a field of
// KubeletConfiguration has no entry, or more than one, in Fields, and when
// an entry names no field: a field added upstream must be classified before
// a bump of k8s.io/kubelet lands.
func TestFieldsCoverKubeletConfiguration(t *testing.T) {
	names := kubeletConfigurationFields(t)
	if len(names) < 100 || !slices.Contains(names, "apiVersion") || !slices.Contains(names, "maxPods") {
		t.Fatalf("walked %d fields of KubeletConfiguration (%q...): the walk is broken", len(names), names[:min(3, len(names))])
	}
	entries := map[string]int{}
	for _, f := range Fields() {
		entries[f.Name]++
	}
	for _, name := range names {
		switch entries[name] {
		case 1:
		case 0:
			t.Errorf("KubeletConfiguration field %q has no entry in Fields(): classify it (fields.go or fields_restart.go)", name)
		default:
			t.Errorf("KubeletConfiguration field %q has %d entries in Fields()", name, entries[name])
		}
		if !kubeletconfig.IsTopLevelField(name) {
			t.Errorf("kubeletconfig.IsTopLevelField(%q) = false; it and this walk disagree", name)
		}
	}
	for name := range entries {
		if !slices.Contains(names, name) {
			t.Errorf("Fields() has an entry for %q, which is not a KubeletConfiguration field", name)
		}
	}
}

func TestFieldsAreWellFormed(t *testing.T) {
	fields := Fields()
	if !slices.IsSortedFunc(fields, func(a, b Field) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Fields() is not sorted by name")
	}
	for _, f := range fields {
		if f.Need != NeedRestart && f.Need != NeedDrain {
			t.Errorf("%s: Need %q", f.Name, f.Need)
		}
		if f.When == "" || f.Why == "" {
			t.Errorf("%s: When %q, Why %q: both must say something", f.Name, f.When, f.Why)
		}
		if f.Need == NeedRestart && (f.When != always || len(f.StateFiles) > 0) {
			t.Errorf("%s: a restart is always a restart and removes nothing, got When %q, StateFiles %q", f.Name, f.When, f.StateFiles)
		}
		for _, file := range f.StateFiles {
			if !isRemovable(file) {
				t.Errorf("%s: state file %q is not one this package may remove", f.Name, file)
			}
		}
	}
	// Fields hands out copies: a caller cannot change the table.
	fields[0].StateFiles = append(fields[0].StateFiles, "x")
	for i := range fields {
		if len(fields[i].StateFiles) > 0 {
			fields[i].StateFiles[0] = "changed"
		}
	}
	for _, f := range Fields() {
		if slices.Contains(f.StateFiles, "changed") || slices.Contains(f.StateFiles, "x") {
			t.Fatalf("changing what Fields() returned changed the table: %+v", f)
		}
	}
}

// TestDrainFieldsHaveRules checks that every field the table says can need
// a drain is named by at least one case of TestClassifyFiles, so that no
// entry of the table is a promise no rule keeps.
func TestDrainFieldsHaveRules(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range classifyCases {
		for _, name := range tc.fields {
			covered[name] = true
		}
	}
	for _, f := range Fields() {
		if f.Need == NeedDrain && !covered[f.Name] {
			t.Errorf("%s needs a drain %s, but no case shows a rule draining for it", f.Name, f.When)
		}
	}
}
