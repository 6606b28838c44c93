package kubeletconfig

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// testGates is a small table with one gate per situation, so that these tests
// do not change meaning when the generated data is regenerated.
var testGates = &gateData{
	source: "test data",
	oldest: minorVersion{1, 34},
	newest: minorVersion{1, 37},
	table: map[string][]featureGateStage{
		allAlphaGate: {{since: minorVersion{0, 0}, stage: stageAlpha}},
		allBetaGate:  {{since: minorVersion{0, 0}, stage: stageBeta}},
		// GA long ago, deprecated, then locked off.
		"Retired": {
			{since: minorVersion{1, 0}, stage: stageGA, defaultValue: true},
			{since: minorVersion{1, 31}, stage: stageDeprecated},
			{since: minorVersion{1, 35}, stage: stageDeprecated, lockToDefault: true},
		},
		// Alpha in 1.35, beta in 1.36, GA and locked on in 1.37.
		"Growing": {
			{since: minorVersion{1, 35}, stage: stageAlpha},
			{since: minorVersion{1, 36}, stage: stageBeta, defaultValue: true},
			{since: minorVersion{1, 37}, stage: stageGA, defaultValue: true, lockToDefault: true},
		},
		// On by default in 1.37 only for kubelets whose compatibility version
		// (one minor back) is 1.37, i.e. from 1.38 on.
		"Compat": {
			{since: minorVersion{1, 36}, stage: stageBeta},
			{since: minorVersion{1, 37}, stage: stageBeta, defaultValue: true, minCompatibility: minorVersion{1, 37}},
		},
		// Registered but not settable before 1.37.
		"Hidden": {
			{since: minorVersion{1, 35}, stage: stagePreAlpha},
			{since: minorVersion{1, 37}, stage: stageAlpha},
		},
		"Experimental": {{since: minorVersion{1, 30}, stage: stageAlpha}},
		// Gates that guard fields, with made-up histories.
		"NodeSwap":             {{since: minorVersion{1, 30}, stage: stageBeta}, {since: minorVersion{1, 36}, stage: stageBeta, defaultValue: true}},
		"GracefulNodeShutdown": {{since: minorVersion{1, 30}, stage: stageAlpha}},
	},
}

func TestLookupFeatureGate(t *testing.T) {
	tests := []struct {
		name, gate, version string
		wantKnown           bool
		want                FeatureGate // Name and Since are checked loosely
		wantSince           string
		wantErr             error
	}{
		{name: "deprecated", gate: "Retired", version: "1.34.0", wantKnown: true, want: FeatureGate{Stage: StageDeprecated}, wantSince: "1.31"},
		{name: "locked", gate: "Retired", version: "v1.36.2", wantKnown: true, want: FeatureGate{Stage: StageDeprecated, LockToDefault: true}, wantSince: "1.35"},
		{name: "before it exists", gate: "Growing", version: "1.34.9"},
		{name: "alpha", gate: "Growing", version: "1.35.0", wantKnown: true, want: FeatureGate{Stage: StageAlpha}, wantSince: "1.35"},
		{name: "beta", gate: "Growing", version: "1.36.1-eks-1234", wantKnown: true, want: FeatureGate{Stage: StageBeta, Default: true}, wantSince: "1.36"},
		{name: "GA locked", gate: "Growing", version: "1.37.0", wantKnown: true, want: FeatureGate{Stage: StageGA, Default: true, LockToDefault: true}, wantSince: "1.37"},
		{name: "newer than the data keeps the newest stage", gate: "Growing", version: "1.40.0", wantKnown: true, want: FeatureGate{Stage: StageGA, Default: true, LockToDefault: true}, wantSince: "1.37"},
		{name: "min compatibility not met", gate: "Compat", version: "1.37.0", wantKnown: true, want: FeatureGate{Stage: StageBeta}, wantSince: "1.36"},
		{name: "min compatibility met", gate: "Compat", version: "1.38.0", wantKnown: true, want: FeatureGate{Stage: StageBeta, Default: true}, wantSince: "1.37"},
		{name: "pre-alpha is unknown", gate: "Hidden", version: "1.36.0"},
		{name: "after pre-alpha", gate: "Hidden", version: "1.37.0", wantKnown: true, want: FeatureGate{Stage: StageAlpha}, wantSince: "1.37"},
		{name: "unknown gate", gate: "NoSuchGate", version: "1.37.0"},
		{name: "too old", gate: "Experimental", version: "1.33.5", wantErr: ErrVersionNotCovered},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, known, err := testGates.lookup(tc.gate, version.MustParseGeneric(tc.version))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("lookup() error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("lookup() error = %v", err)
			}
			if known != tc.wantKnown {
				t.Fatalf("lookup() known = %t, want %t", known, tc.wantKnown)
			}
			if !known {
				return
			}
			if got.Name != tc.gate || got.Default != tc.want.Default || got.LockToDefault != tc.want.LockToDefault || got.Stage != tc.want.Stage {
				t.Errorf("lookup() = %+v, want %+v", got, tc.want)
			}
			if got.Since.String() != tc.wantSince {
				t.Errorf("lookup() since %s, want %s", got.Since, tc.wantSince)
			}
		})
	}
	if _, _, err := testGates.lookup("Growing", nil); err == nil {
		t.Error("lookup() with no version succeeded")
	}
}

func TestCheckFeatureGates(t *testing.T) {
	tests := []struct {
		name    string
		version string
		body    string
		want    []string
		// wantDetail, when set, must appear in the first error.
		wantDetail string
	}{
		{name: "no gates", version: "1.37.0", body: ""},
		{name: "known gates", version: "1.37.0", body: "featureGates:\n  Experimental: true\n  Compat: true\n  Retired: false\n"},
		{name: "unknown gate", version: "1.37.0", body: "featureGates:\n  NoSuchGate: true\n", want: []string{"featureGates[NoSuchGate]: Invalid value"}, wantDetail: "unknown feature gate for kubelet 1.37"},
		{name: "unknown gate on a kubelet newer than the data", version: "1.39.0", body: "featureGates:\n  NoSuchGate: true\n", want: []string{"featureGates[NoSuchGate]: Invalid value"}, wantDetail: "up to kubelet 1.37"},
		{name: "gate newer than the kubelet", version: "1.34.3", body: "featureGates:\n  Growing: true\n", want: []string{"featureGates[Growing]: Invalid value"}, wantDetail: "not available before kubelet 1.35"},
		{name: "pre-alpha gate", version: "1.36.0", body: "featureGates:\n  Hidden: true\n", want: []string{"featureGates[Hidden]: Invalid value"}, wantDetail: "not available before kubelet 1.37"},
		{name: "locked gate set to its default", version: "1.37.0", body: "featureGates:\n  Growing: true\n"},
		{name: "locked gate set against its default", version: "1.37.0", body: "featureGates:\n  Growing: false\n", want: []string{"featureGates[Growing]: Forbidden"}, wantDetail: "locked to true"},
		{name: "gate locked off", version: "1.35.0", body: "featureGates:\n  Retired: true\n", want: []string{"featureGates[Retired]: Forbidden"}, wantDetail: "locked to false"},
		{name: "same gate before it was locked", version: "1.34.0", body: "featureGates:\n  Retired: true\n"},
		{name: "several problems sorted", version: "1.37.0", body: "featureGates:\n  Zeta: true\n  Growing: false\n  Alpha: false\n", want: []string{"featureGates[Alpha]: Invalid value", "featureGates[Growing]: Forbidden", "featureGates[Zeta]: Invalid value"}},
		{name: "too old with gates", version: "1.30.0", body: "featureGates:\n  Experimental: true\n", want: []string{"featureGates: Invalid value"}, wantDetail: "covers kubelet 1.34 and newer"},
		{name: "too old without gates", version: "1.30.0", body: "memorySwap:\n  swapBehavior: LimitedSwap\n"},
		{name: "gated field with gate on by default", version: "1.36.0", body: "memorySwap:\n  swapBehavior: NoSwap\n"},
		{name: "gated field with gate off by default", version: "1.35.0", body: "memorySwap:\n  swapBehavior: NoSwap\n", want: []string{"memorySwap: Forbidden"}, wantDetail: "requires feature gate NodeSwap, which is disabled"},
		{name: "gated field with gate turned on", version: "1.35.0", body: "featureGates:\n  NodeSwap: true\nmemorySwap:\n  swapBehavior: NoSwap\n"},
		{name: "gated field with gate turned off", version: "1.36.0", body: "featureGates:\n  NodeSwap: false\nmemorySwap:\n  swapBehavior: NoSwap\n", want: []string{"memorySwap: Forbidden"}},
		{name: "gated field with AllBeta", version: "1.35.0", body: "featureGates:\n  AllBeta: true\nmemorySwap:\n  swapBehavior: NoSwap\n"},
		{name: "explicit gate wins over AllBeta", version: "1.35.0", body: "featureGates:\n  AllBeta: true\n  NodeSwap: false\nmemorySwap:\n  swapBehavior: NoSwap\n", want: []string{"memorySwap: Forbidden"}},
		{name: "gated field with AllAlpha", version: "1.35.0", body: "featureGates:\n  AllAlpha: true\nshutdownGracePeriod: 30s\n"},
		{name: "AllAlpha does not reach beta gates", version: "1.35.0", body: "featureGates:\n  AllAlpha: true\nmemorySwap:\n  swapBehavior: NoSwap\n", want: []string{"memorySwap: Forbidden"}},
		{name: "gated field whose gate the kubelet lacks", version: "1.35.0", body: "serverTLSBootstrap: true\n", want: []string{"serverTLSBootstrap: Forbidden"}, wantDetail: "which kubelet 1.35 does not have"},
		{name: "unset gated field", version: "1.35.0", body: "shutdownGracePeriod: 0s\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := testGates.check(decodeBody(t, tc.body), version.MustParseGeneric(tc.version))
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if got := errorKeys(errs); !slices.Equal(got, want) {
				t.Fatalf("check() = %v\nerror keys %q, want %q", errs, got, want)
			}
			if tc.wantDetail != "" && !strings.Contains(errs[0].Error(), tc.wantDetail) {
				t.Errorf("check() error %q does not contain %q", errs[0], tc.wantDetail)
			}
		})
	}
}

func TestCheckFeatureGatesNilArguments(t *testing.T) {
	if errs := CheckFeatureGates(nil, version.MajorMinor(1, 37)); len(errs) != 1 {
		t.Errorf("CheckFeatureGates(nil, 1.37) = %v, want one error", errs)
	}
	if errs := CheckFeatureGates(&kubeletconfigv1beta1.KubeletConfiguration{}, nil); len(errs) != 1 {
		t.Errorf("CheckFeatureGates(cfg, nil) = %v, want one error", errs)
	}
}

// The tests below read the generated table; they check its shape and derive
// their cases from it, so that they keep their meaning after regeneration.

func TestGeneratedFeatureGateData(t *testing.T) {
	source, oldest, newest := FeatureGateCoverage()
	if !strings.HasPrefix(source, "k8s.io/kubernetes v"+newest.String()) {
		t.Errorf("source %q does not match newest covered version %s", source, newest)
	}
	if !oldest.EqualTo(newest.SubtractMinor(3)) {
		t.Errorf("coverage %s..%s, want the source release and the three before it", oldest, newest)
	}
	for _, gate := range []string{allAlphaGate, allBetaGate} {
		if _, known, err := LookupFeatureGate(gate, newest); err != nil || !known {
			t.Errorf("LookupFeatureGate(%s) = known %t, error %v", gate, known, err)
		}
	}
	for name, history := range featureGateTable {
		if len(history) == 0 {
			t.Errorf("gate %s has no stages", name)
		}
		for i := 1; i < len(history); i++ {
			if history[i].since.less(history[i-1].since) {
				t.Errorf("gate %s: stages out of order", name)
			}
		}
	}
}

func TestGatedFieldsNameKnownGates(t *testing.T) {
	_, _, newest := FeatureGateCoverage()
	for _, gated := range gatedFields {
		if _, known, err := LookupFeatureGate(gated.gate, newest); err != nil || !known {
			t.Errorf("gate %s guarding %s is not known at %s (error %v); update gatedFields", gated.gate, strings.Join(gated.path, "."), newest, err)
		}
	}
}

func TestCheckFeatureGatesOnGeneratedData(t *testing.T) {
	_, oldest, newest := FeatureGateCoverage()
	at := minorOf(newest)
	var locked, added string
	for _, name := range sortedKeys(featureGateTable) {
		stage, ok := generatedGates.stageAt(name, at)
		if locked == "" && ok && stage.lockToDefault {
			locked = name
		}
		if first, ok := generatedGates.firstKnown(name); added == "" && ok && first == at {
			added = name
		}
	}
	if locked == "" || added == "" {
		t.Fatalf("the data has no gate locked at %s (%q) or added in %s (%q)", newest, locked, newest, added)
	}
	gate, _, _ := LookupFeatureGate(locked, newest)
	cfg := &kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: map[string]bool{locked: !gate.Default, added: true}}
	got := errorKeys(CheckFeatureGates(cfg, newest))
	want := []string{"featureGates[" + locked + "]: Forbidden"}
	if !slices.Equal(got, want) {
		t.Errorf("at %s: %q, want %q", newest, got, want)
	}
	if got := errorKeys(CheckFeatureGates(cfg, newest.SubtractMinor(1))); !slices.Contains(got, "featureGates["+added+"]: Invalid value") {
		t.Errorf("at %s, gate %s added in %s: %q", newest.SubtractMinor(1), added, newest, got)
	}

	production := loadTestConfig(t, "kubelet-4k.yaml")
	for v := oldest; !newest.LessThan(v); v = v.AddMinor(1) {
		if errs := CheckFeatureGates(production, v); len(errs) > 0 {
			t.Errorf("production config at kubelet %s: %v", v, errs)
		}
	}
}
