package contract

import (
	"reflect"
	"strings"
	"testing"
)

func TestDrainOptionsOf(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        DrainOptions
		err         string
	}{
		{nil, DrainOptions{}, ""},
		{map[string]string{DrainForceAnnotation: "true"}, DrainOptions{Force: true}, ""},
		{map[string]string{DrainForceAnnotation: "false", DrainDeleteEmptyDirDataAnnotation: "true"}, DrainOptions{DeleteEmptyDirData: true}, ""},
		{map[string]string{DrainForceAnnotation: "yes", DrainDeleteEmptyDirDataAnnotation: "true"}, DrainOptions{DeleteEmptyDirData: true}, DrainForceAnnotation + `="yes"`},
	} {
		got, err := DrainOptionsOf(tc.annotations)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("DrainOptionsOf(%v) = %+v, %v; want %+v, %q", tc.annotations, got, err, tc.want, tc.err)
		}
		back := map[string]string{}
		for k, v := range got.Annotations() {
			if v != nil {
				back[k] = *v
			}
		}
		if again, _ := DrainOptionsOf(back); again != got {
			t.Errorf("%+v does not round-trip through its annotations: %v", got, back)
		}
	}
}

func TestTrialTermsOf(t *testing.T) {
	period := int32(90)
	off := false
	for _, tc := range []struct {
		value string
		want  *TrialTerms
		err   string
	}{
		{"", nil, ""},
		{`{"periodSeconds":90,"signals":{"pressure":false},"allowShrink":true}`, &TrialTerms{PeriodSeconds: &period, Signals: &TrialSignals{Pressure: &off}, AllowShrink: true}, ""},
		{`{"periodSecs":90}`, nil, "unknown field"},
		{`{"periodSeconds":0}`, nil, "want 1 to 86400"},
		{`{} {}`, nil, "more than one"},
		{`nope`, nil, "invalid character"},
	} {
		got, err := TrialTermsOf(map[string]string{TrialAnnotation: tc.value})
		if !reflect.DeepEqual(got, tc.want) || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("TrialTermsOf(%q) = %+v, %v; want %+v, %q", tc.value, got, err, tc.want, tc.err)
		}
		if got == nil {
			continue
		}
		value, err := got.Annotation()
		if err != nil || value == nil {
			t.Fatalf("Annotation() = %v, %v", value, err)
		}
		if again, err := TrialTermsOf(map[string]string{TrialAnnotation: *value}); err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%s does not round-trip: %+v, %v", *value, again, err)
		}
		if c := got.DeepCopy(); !reflect.DeepEqual(c, got) || c.Signals == got.Signals || c.PeriodSeconds == got.PeriodSeconds {
			t.Errorf("DeepCopy shares or differs: %+v", c)
		}
	}
	if value, err := (&TrialTerms{Signals: &TrialSignals{}}).Annotation(); value != nil || err != nil {
		t.Errorf("terms that say nothing: %v, %v; want the annotation removed", value, err)
	}
}
