package kubeletconfig

//go:generate go run -C ../../hack/tools/kube ./cmd/featuregen -o ../../../pkg/kubeletconfig/featuregates_generated.go

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// ErrVersionNotCovered is returned for a kubelet older than the oldest version
// the feature-gate data describes (see FeatureGateCoverage).
var ErrVersionNotCovered = errors.New("kubelet version is older than the feature-gate data covers")

// Stages a feature gate goes through, as component-base names them (except GA,
// which component-base spells as the empty string).
const (
	StagePreAlpha   = "PRE-ALPHA"
	StageAlpha      = "ALPHA"
	StageBeta       = "BETA"
	StageGA         = "GA"
	StageDeprecated = "DEPRECATED"
)

// The generated table refers to these short names.
const (
	stagePreAlpha   = StagePreAlpha
	stageAlpha      = StageAlpha
	stageBeta       = StageBeta
	stageGA         = StageGA
	stageDeprecated = StageDeprecated
)

// The kubelet treats these two gates specially: setting one sets every alpha
// (or beta) gate that is not set explicitly.
const (
	allAlphaGate = "AllAlpha"
	allBetaGate  = "AllBeta"
)

// FeatureGate is one gate as a kubelet of a given version knows it.
type FeatureGate struct {
	Name          string
	Default       bool
	LockToDefault bool
	// Stage is one of the Stage constants.
	Stage string
	// Since is the first kubelet version this stage applies to.
	Since *version.Version
}

// minorVersion is a kubelet release; feature gates change only on minor
// releases, so the patch level never matters here.
type minorVersion struct {
	major, minor uint
}

func minorOf(v *version.Version) minorVersion {
	return minorVersion{major: v.Major(), minor: v.Minor()}
}

func (v minorVersion) less(other minorVersion) bool {
	if v.major != other.major {
		return v.major < other.major
	}
	return v.minor < other.minor
}

// previous is the kubelet's default minimum compatibility version: one minor
// release back.
func (v minorVersion) previous() minorVersion {
	if v.minor == 0 {
		return v
	}
	return minorVersion{major: v.major, minor: v.minor - 1}
}

func (v minorVersion) version() *version.Version {
	return version.MajorMinor(v.major, v.minor)
}

func (v minorVersion) String() string {
	return fmt.Sprintf("%d.%d", v.major, v.minor)
}

// featureGateStage is one row of a gate's history in the generated table.
type featureGateStage struct {
	since            minorVersion
	stage            string
	defaultValue     bool
	lockToDefault    bool
	minCompatibility minorVersion // zero: applies whatever the compatibility version
}

// gateData is a feature-gate table with the range of kubelets it describes;
// tests substitute their own.
type gateData struct {
	source         string
	oldest, newest minorVersion
	table          map[string][]featureGateStage
}

var generatedGates = &gateData{
	source: featureGateSource,
	oldest: featureGateOldest,
	newest: featureGateNewest,
	table:  featureGateTable,
}

// FeatureGateCoverage reports the Kubernetes release the feature-gate data was
// generated from and the range of kubelet minor versions it describes exactly.
//
// A release keeps the gates of the three releases before it (so that it can
// emulate them), hence the range is the source release and the three before it.
// For an older kubelet the data may lack gates removed since, so lookups and
// CheckFeatureGates refuse to guess (ErrVersionNotCovered). For a kubelet newer
// than the source release the newest known stage of each gate is assumed; gates
// added or removed after the source release are not known. Regenerate the data
// (go generate ./pkg/kubeletconfig) after bumping k8s.io/kubernetes in
// hack/tools/kube to move the range.
func FeatureGateCoverage() (source string, oldest, newest *version.Version) {
	return generatedGates.source, generatedGates.oldest.version(), generatedGates.newest.version()
}

// LookupFeatureGate reports gate name as a kubelet of kubeletVersion knows it.
// known is false when that kubelet does not know the gate, or knows it only as
// pre-alpha, which the kubelet refuses to set either way. err wraps
// ErrVersionNotCovered when kubeletVersion is older than the data covers.
// Only the major and minor components of kubeletVersion matter.
func LookupFeatureGate(name string, kubeletVersion *version.Version) (gate FeatureGate, known bool, err error) {
	return generatedGates.lookup(name, kubeletVersion)
}

func (d *gateData) lookup(name string, kubeletVersion *version.Version) (FeatureGate, bool, error) {
	if kubeletVersion == nil {
		return FeatureGate{}, false, errors.New("no kubelet version given")
	}
	at := minorOf(kubeletVersion)
	if at.less(d.oldest) {
		return FeatureGate{}, false, fmt.Errorf("%w: kubelet %s, oldest covered %s (data from %s)", ErrVersionNotCovered, at, d.oldest, d.source)
	}
	stage, ok := d.stageAt(name, at)
	if !ok {
		return FeatureGate{}, false, nil
	}
	return FeatureGate{
		Name:          name,
		Default:       stage.defaultValue,
		LockToDefault: stage.lockToDefault,
		Stage:         stage.stage,
		Since:         stage.since.version(),
	}, true, nil
}

// stageAt picks the stage of a gate that applies at a kubelet version the way
// component-base does: the latest stage not newer than the kubelet whose
// minimum compatibility version, if any, the kubelet's (one minor back) meets.
// A pre-alpha stage, which the kubelet refuses to set, counts as unknown.
func (d *gateData) stageAt(name string, at minorVersion) (featureGateStage, bool) {
	history := d.table[name]
	compat := at.previous()
	for i := len(history) - 1; i >= 0; i-- {
		stage := history[i]
		if at.less(stage.since) {
			continue
		}
		if stage.minCompatibility != (minorVersion{}) && compat.less(stage.minCompatibility) {
			continue
		}
		return stage, stage.stage != stagePreAlpha
	}
	return featureGateStage{}, false
}

// firstKnown is the first kubelet version at which a gate could be set, for
// messages about gates that a kubelet is too old for.
func (d *gateData) firstKnown(name string) (minorVersion, bool) {
	for _, stage := range d.table[name] {
		if stage.stage != stagePreAlpha {
			return stage.since, true
		}
	}
	return minorVersion{}, false
}
