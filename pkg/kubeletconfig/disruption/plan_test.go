package disruption

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

func TestClassifyNilIsDefaults(t *testing.T) {
	explicit := &kubeletconfigv1beta1.KubeletConfiguration{
		CPUManagerPolicy:    "none",
		MemoryManagerPolicy: "None",
		MaxPods:             110,
		CgroupsPerQOS:       ptr.To(true),
		EvictionHard:        map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
	}
	for name, pair := range map[string][2]*kubeletconfigv1beta1.KubeletConfiguration{
		"nil to nil":      {nil, nil},
		"nil to empty":    {nil, {}},
		"nil to explicit": {nil, explicit},
		"explicit to nil": {explicit, nil},
	} {
		if plan := Classify(pair[0], pair[1]); plan.Drain || len(plan.Reasons) > 0 || len(plan.StateFiles) > 0 {
			t.Errorf("%s: Classify() = %+v, want nothing", name, plan)
		}
	}
	plan := Classify(nil, &kubeletconfigv1beta1.KubeletConfiguration{MaxPods: 10, CPUManagerPolicy: "static"})
	if want := []string{`cpuManagerPolicy: "none" -> "static" (removes cpu_manager_state)`, "maxPods: 110 -> 10 shrinks what the node holds"}; !slices.Equal(plan.Reasons, want) {
		t.Errorf("Classify(nil, ...) Reasons = %q, want %q", plan.Reasons, want)
	}
}

func TestClassifyReservedMemoryQuantities(t *testing.T) {
	reserve := func(policy string, quantities ...string) *kubeletconfigv1beta1.KubeletConfiguration {
		cfg := &kubeletconfigv1beta1.KubeletConfiguration{MemoryManagerPolicy: policy}
		for node, q := range quantities {
			cfg.ReservedMemory = append(cfg.ReservedMemory, kubeletconfigv1beta1.MemoryReservation{
				NumaNode: int32(node),
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)},
			})
		}
		return cfg
	}
	if plan := Classify(reserve("Static", "1Gi"), reserve("Static", "1024Mi")); plan.Drain {
		t.Errorf("1Gi -> 1024Mi: %q, want no drain", plan.Reasons)
	}
	plan := Classify(reserve("Static", "1Gi"), reserve("Static", "1Gi", "1Gi"))
	if !plan.Drain || !slices.Equal(plan.StateFiles, []string{memoryManagerState}) {
		t.Errorf("a NUMA node more: %+v, want a drain removing %s", plan, memoryManagerState)
	}
	if plan := Classify(reserve("", "1Gi"), reserve("None", "1Gi", "1Gi")); plan.Drain {
		t.Errorf("under None: %q, want no drain", plan.Reasons)
	}
}

func TestClassifyDoesNotModifyItsInput(t *testing.T) {
	from := &kubeletconfigv1beta1.KubeletConfiguration{
		CPUManagerPolicy: "static", ReservedSystemCPUs: "0-1",
		KubeReserved: map[string]string{"cpu": "1", "memory": "1Gi"}, EvictionHard: map[string]string{"memory.available": "1Gi"},
		MergeDefaultEvictionSettings: ptr.To(true),
	}
	to := &kubeletconfigv1beta1.KubeletConfiguration{ReservedSystemCPUs: "0-3", SystemReserved: nil}
	fromCopy, toCopy := from.DeepCopy(), to.DeepCopy()
	Classify(from, to)
	if !apiequality.Semantic.DeepEqual(from, fromCopy) || !apiequality.Semantic.DeepEqual(to, toCopy) || to.SystemReserved != nil {
		t.Errorf("Classify modified its input:\nfrom %+v\nto %+v", from, to)
	}
}

// TestPlansAgreeWithFields runs every case and checks each Plan against the
// table: a field a Reason names needs a drain there, a file a Plan removes is
// one the table lists for a field of its Reasons, and only removable files
// ever appear, sorted and once.
func TestPlansAgreeWithFields(t *testing.T) {
	table := map[string]Field{}
	for _, f := range Fields() {
		table[f.Name] = f
	}
	for _, tc := range classifyCases {
		plan, err := ClassifyFiles(file(tc.from), file(tc.to))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if plan.Drain != (len(plan.Reasons) > 0) || (len(plan.StateFiles) > 0 && !plan.Drain) {
			t.Errorf("%s: Drain %v with %d reasons and files %q", tc.name, plan.Drain, len(plan.Reasons), plan.StateFiles)
		}
		if !slices.IsSorted(plan.StateFiles) || len(slices.Compact(slices.Clone(plan.StateFiles))) != len(plan.StateFiles) {
			t.Errorf("%s: StateFiles %q are not sorted and unique", tc.name, plan.StateFiles)
		}
		// What the rules found, before plan() drops any file not on the
		// removable list: a rule naming another file is a bug to catch
		// here, not to leave to that safety net.
		c := change{from: newView(mustDecode(t, tc.from)), to: newView(mustDecode(t, tc.to)), findings: map[string]*finding{}}
		for _, rule := range rules {
			rule(&c)
		}
		for field, found := range c.findings {
			for _, file := range found.files {
				if !slices.Contains(table[field].StateFiles, file) {
					t.Errorf("%s: the rules have %s remove %q, which the table does not list for it", tc.name, field, file)
				}
			}
		}
		var allowed []string
		for _, name := range reasonFields(plan.Reasons) {
			f, ok := table[name]
			if !ok || f.Need != NeedDrain {
				t.Errorf("%s: a Reason names %q, which the table does not say can need a drain", tc.name, name)
			}
			allowed = append(allowed, f.StateFiles...)
		}
		for _, file := range plan.StateFiles {
			if !isRemovable(file) || !slices.Contains(allowed, file) {
				t.Errorf("%s: removes %q, not listed for %q", tc.name, file, reasonFields(plan.Reasons))
			}
		}
	}
}

func TestClassifyFilesErrors(t *testing.T) {
	large := append(file("maxPods: 20\n"), bytes.Repeat([]byte("# padding\n"), kubeletconfig.MaxConfigBytes/10+1)...)
	_, err := ClassifyFiles(nil, large)
	if !errors.Is(err, kubeletconfig.ErrTooLarge) {
		t.Errorf("ClassifyFiles(large) error = %v, want %v", err, kubeletconfig.ErrTooLarge)
	}
	_, err = ClassifyFiles([]byte("apiVersion: v1\nkind: ConfigMap\n"), nil)
	if !errors.Is(err, ErrNotKubeletConfiguration) || !strings.Contains(err.Error(), "the old configuration") {
		t.Errorf("ClassifyFiles(ConfigMap, nil) error = %v, want %v naming the side", err, ErrNotKubeletConfiguration)
	}
}

func TestThresholdGrows(t *testing.T) {
	for _, tc := range []struct {
		was, is string
		want    bool
	}{
		{"100Mi", "100Mi", false},
		{"100Mi", "104857600", false},
		{"100Mi", "101Mi", true},
		{"10%", "10.5%", true},
		{"10%", "9%", false},
		{"", "1Mi", true},
		{"1Mi", "", false},
		{"0%", "1%", true},
		{"5%", "100%", false},
		{"5%", "1Gi", true},
		{"1Gi", "5%", true},
		{"1Gi", "garbage", true},
		{"garbage", "1Gi", true},
		{"150%", "10%", true},
	} {
		if got := thresholdGrows(tc.was, tc.is); got != tc.want {
			t.Errorf("thresholdGrows(%q, %q) = %v, want %v", tc.was, tc.is, got, tc.want)
		}
	}
}

func mustDecode(t *testing.T, body string) *kubeletconfigv1beta1.KubeletConfiguration {
	t.Helper()
	cfg, err := DecodeLenient(file(body))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
