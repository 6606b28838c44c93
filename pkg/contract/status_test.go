package contract

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseConfigStatus(t *testing.T) {
	want := ConfigStatus{
		Assigned: &ConfigMapVersion{Namespace: "kubelet-configs", Name: "v2", UID: "u2", ResourceVersion: "7"},
		Active:   &ConfigMapVersion{Namespace: "kubelet-configs", Name: "v2", UID: "u2", ResourceVersion: "7"},
		Phase:    PhaseDraining, PendingPods: []string{"default/web-0"},
		Running: &RunningConfig{State: RunningDiffers, Differences: []FieldDifference{{Field: "maxPods"}}},
	}
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseConfigStatus(string(raw))
	if err != nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("ParseConfigStatus(%s) = %+v, %v; want what was written", raw, got, err)
	}
	for _, bad := range []string{"", "{", `{"assigned":"kubelet-configs/v2"}`, "null x"} {
		if got, err := ParseConfigStatus(bad); err == nil || got != nil {
			t.Errorf("ParseConfigStatus(%q) = %+v, %v; want no status and an error", bad, got, err)
		}
	}
}
