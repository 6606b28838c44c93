package effective

import (
	"strings"
	"testing"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// configz is what a v1.37 kubelet serves, trimmed to the fields the tests
// look at, with the values the kubelet defaults them to.
func configz(t *testing.T, extra string) []byte {
	t.Helper()
	out, err := ParseConfigz([]byte(`{"kubeletconfig":{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
		"maxPods":110,"cpuManagerPolicy":"none","syncFrequency":"1m0s","cgroupDriver":"cgroupfs",
		"evictionHard":{"imagefs.available":"15%","imagefs.inodesFree":"5%","memory.available":"100Mi","nodefs.available":"10%","nodefs.inodesFree":"5%"},
		"featureGates":{"KubeletTracing":false},"logging":{"format":"text","flushFrequency":"5s","verbosity":1},
		"enforceNodeAllocatable":["pods"],"containerLogMaxSize":"10Mi"` + extra + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name    string
		asked   string
		running string // extra /configz fields, over the defaults above
		skip    []string
		want    []string // Difference.String() prefixes (before the source)
	}{
		{name: "what runs", asked: "maxPods: 110\ncpuManagerPolicy: none\n"},
		{name: "spelled otherwise", asked: "syncFrequency: 1m\nevictionHard:\n  memory.available: 100Mi\n"},
		{name: "a zero maxPods is the default", asked: "maxPods: 0\n"},
		{name: "an unset cpu manager policy is none", asked: `cpuManagerPolicy: ""` + "\n"},
		{name: "a zero with an unknown default is not guessed", asked: `containerLogMaxSize: ""` + "\n"},
		{name: "one field differs", asked: "maxPods: 50\n", want: []string{"maxPods: 50 asked, 110 running"}},
		{name: "a string differs", asked: "cpuManagerPolicy: static\n", want: []string{`cpuManagerPolicy: "static" asked, "none" running`}},
		{name: "map keys one by one", asked: "evictionHard:\n  memory.available: 200Mi\n  nodefs.available: 10%\n",
			want: []string{`evictionHard[memory.available]: "200Mi" asked, "100Mi" running`}},
		{name: "feature gates one by one", asked: "featureGates:\n  KubeletTracing: true\n  Other: true\n",
			want: []string{`featureGates[KubeletTracing]: true asked, false running`, `featureGates[Other]: true asked, unset running`}},
		{name: "a nested field", asked: "logging:\n  format: json\n", want: []string{`logging.format: "json" asked, "text" running`}},
		{name: "an empty map asked, defaults running", asked: "evictionHard: {}\n", want: []string{`evictionHard: {} asked, {"imagefs.available"`}},
		{name: "an empty list asked and running", asked: "clusterDNS: []\n"},
		{name: "a list differs", asked: "enforceNodeAllocatable: [none]\n", want: []string{`enforceNodeAllocatable: ["none"] asked, ["pods"] running`}},
		{name: "node-local fields are the node's", asked: "maxPods: 50\nproviderID: x\n", skip: []string{"maxPods", "providerID"}},
		{name: "reserved CPUs overwrite the cpu reservations", asked: "reservedSystemCPUs: \"0\"\nkubeReserved:\n  cpu: 500m\n",
			running: `,"reservedSystemCPUs":"0"`},
		{name: "reserved CPUs not running", asked: "reservedSystemCPUs: \"0\"\n", want: []string{`reservedSystemCPUs: "0" asked, unset running`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diffs, err := Compare([]byte(header+tt.asked), tt.skip, Observed{Config: configz(t, tt.running)})
			if err != nil {
				t.Fatal(err)
			}
			if len(diffs) != len(tt.want) {
				t.Fatalf("differences %q, want %q", Describe(diffs), tt.want)
			}
			for i, d := range diffs {
				if !strings.HasPrefix(d.String(), tt.want[i]) {
					t.Errorf("difference %d = %q, want it to start %q", i, d, tt.want[i])
				}
			}
		})
	}
}

func TestCompareSources(t *testing.T) {
	own := File{Path: "/etc/kubernetes/kubelet.conf.d/90-nodeguard.conf", Own: true, DropIn: true, Data: []byte(header + "maxPods: 50\n")}
	base := File{Path: "/var/lib/kubelet/config.yaml", Data: []byte(header + "maxPods: 30\n")}
	site := File{Path: "/etc/kubernetes/kubelet.conf.d/99-site.conf", DropIn: true, Data: []byte(header + "maxPods: 20\n")}
	asked := []byte(header + "maxPods: 50\n")
	tests := []struct {
		name string
		obs  Observed
		want string
	}{
		{"a later drop-in", Observed{Files: []File{base, own, site}},
			"set by drop-in /etc/kubernetes/kubelet.conf.d/99-site.conf, which the kubelet merges after the agent's file"},
		{"a flag, as /flagz shows it", Observed{Files: []File{base, own}, Flags: map[string]string{"max-pods": "20", "config": base.Path}},
			"set by the kubelet's command line: --max-pods=20"},
		{"a flag at its default is not the cause", Observed{Files: []File{base, own}, Flags: map[string]string{"max-pods": "110"}},
			"not by the kubelet's files or flags: the kubelet has not read its files since they changed"},
		{"no /flagz", Observed{Files: []File{base, own}},
			"not by the kubelet's files: a flag on its command line (--max-pods), or the kubelet has not read its files since they changed"},
		{"the agent's file edited", Observed{Files: []File{base, {Path: own.Path, Own: true, DropIn: true, Data: []byte(header + "maxPods: 20\n")}}},
			"the agent's file /etc/kubernetes/kubelet.conf.d/90-nodeguard.conf was changed since the agent wrote it: it says 20"},
		{"the agent's file not read", Observed{NotReadingOwn: "the kubelet's --config is /tmp/other.yaml"},
			"the kubelet's --config is /tmp/other.yaml"},
		{"a later drop-in removing the field", Observed{Files: []File{own, {Path: "/d/99.conf", DropIn: true, Data: []byte(header + "maxPods: null\n")}}},
			"set by drop-in /d/99.conf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obs.Config = configz(t, `,"maxPods":20`)
			diffs, err := Compare(asked, nil, tt.obs)
			if err != nil {
				t.Fatal(err)
			}
			if len(diffs) != 1 {
				t.Fatalf("differences %q, want one", Describe(diffs))
			}
			if !strings.HasPrefix(diffs[0].Source, tt.want) {
				t.Errorf("source = %q, want %q", diffs[0].Source, tt.want)
			}
		})
	}
}

func TestCompareFlagOfAMapKey(t *testing.T) {
	obs := Observed{Config: configz(t, `,"featureGates":{"KubeletTracing":false}`), Flags: map[string]string{"feature-gates": "AllAlpha=false,KubeletTracing=false"},
		Files: []File{{Path: "/c", Own: true, Data: []byte(header + "featureGates:\n  KubeletTracing: true\n")}}}
	diffs, err := Compare([]byte(header+"featureGates:\n  KubeletTracing: true\n"), nil, obs)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) != 1 || diffs[0].Source != "set by the kubelet's command line: --feature-gates=AllAlpha=false,KubeletTracing=false" {
		t.Fatalf("differences %q", Describe(diffs))
	}
}

func TestCompareErrors(t *testing.T) {
	if _, err := Compare([]byte(header+"maxPods: 1\n"), nil, Observed{}); err == nil {
		t.Error("no running configuration: no error")
	}
	if _, err := Compare([]byte("maxPods: [1\n"), nil, Observed{Config: configz(t, "")}); err == nil {
		t.Error("an asked configuration that does not parse: no error")
	}
}

func TestDescribe(t *testing.T) {
	var diffs []Difference
	for i := range 7 {
		diffs = append(diffs, Difference{Field: strings.Repeat("f", i+1), Asked: "1", Running: "2"})
	}
	got := Describe(diffs)
	if !strings.HasSuffix(got, "; and 2 more") || strings.Count(got, "asked") != maxDescribed {
		t.Errorf("Describe = %q", got)
	}
}

func TestParseConfigz(t *testing.T) {
	for _, bad := range []string{``, `[]`, `{}`, `{"kubeletconfig":null}`, `{"kubeletconfig":{"maxPods":"x"}}`} {
		if _, err := ParseConfigz([]byte(bad)); err == nil {
			t.Errorf("ParseConfigz(%q): no error", bad)
		}
	}
	// A kubelet before 1.37 serves no apiVersion and kind.
	out, err := ParseConfigz([]byte(`{"kubeletconfig":{"maxPods":20}}`))
	if err != nil || !strings.Contains(string(out), `"kind":"KubeletConfiguration"`) {
		t.Fatalf("ParseConfigz = %s, %v", out, err)
	}
}

func TestParseFlagz(t *testing.T) {
	flags, err := ParseFlagz([]byte(`{"kind":"Flagz","apiVersion":"config.k8s.io/v1beta1","metadata":{"name":"kubelet"},"flags":{"max-pods":"20"}}`))
	if err != nil || flags["max-pods"] != "20" {
		t.Fatalf("ParseFlagz = %v, %v", flags, err)
	}
	for _, bad := range []string{`text`, `{"kind":"Status"}`} {
		if _, err := ParseFlagz([]byte(bad)); err == nil {
			t.Errorf("ParseFlagz(%q): no error", bad)
		}
	}
}

func TestFlagForNestedAndMapFields(t *testing.T) {
	for field, want := range map[string]string{
		"maxPods": "max-pods", "authentication.anonymous.enabled": "anonymous-auth", "logging.verbosity": "v",
		"evictionHard[memory.available]": "eviction-hard", "featureGates[X]": "feature-gates", "shutdownGracePeriod": "",
	} {
		p := parsePathForTest(field)
		if got := flagFor(p); got != want {
			t.Errorf("flagFor(%s) = %q, want %q", field, got, want)
		}
	}
}

// parsePathForTest reads the few path spellings the tests use.
func parsePathForTest(s string) path {
	var p path
	name, key, hasKey := strings.Cut(s, "[")
	for _, segment := range strings.Split(name, ".") {
		p = p.child(segment, false)
	}
	if hasKey {
		p = p.child(strings.TrimSuffix(key, "]"), true)
	}
	return p
}
