package effective

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/disruption"
)

func TestPredict(t *testing.T) {
	static := header + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"
	tests := []struct {
		name    string
		running string // extra /configz fields
		files   []File
		flags   map[string]string
		next    string // "" removes the agent's file
		want    map[string]any
	}{
		{
			name:    "config mode: a field the new file leaves out goes back to its default",
			running: `,"cpuManagerPolicy":"static","reservedSystemCPUs":"0"`,
			files:   []File{{Path: "/c", Own: true, Data: []byte(static)}},
			next:    header + "maxPods: 50\n",
			want:    map[string]any{"cpuManagerPolicy": "none", "maxPods": json.Number("50"), "reservedSystemCPUs": nil},
		},
		{
			name:    "drop-in mode: the base file's value stands under a drop-in that sets another",
			running: `,"cpuManagerPolicy":"static","reservedSystemCPUs":"0"`,
			files:   []File{{Path: "/c", Data: []byte(static)}, {Path: "/d/90.conf", Own: true, DropIn: true}},
			next:    header + "cpuManagerPolicy: none\n",
			want:    map[string]any{"cpuManagerPolicy": "none", "reservedSystemCPUs": "0"},
		},
		{
			name:    "drop-in mode: the drop-in removed, the base file's value comes back",
			running: `,"cpuManagerPolicy":"none"`,
			files:   []File{{Path: "/c", Data: []byte(static)}, {Path: "/d/90.conf", Own: true, DropIn: true, Data: []byte(header + "cpuManagerPolicy: none\n")}},
			want:    map[string]any{"cpuManagerPolicy": "static"},
		},
		{
			name:    "a later drop-in keeps its field",
			running: `,"maxPods":20`,
			files:   []File{{Path: "/d/90.conf", Own: true, DropIn: true}, {Path: "/d/99.conf", DropIn: true, Data: []byte(header + "maxPods: 20\n")}},
			next:    header + "maxPods: 50\n",
			want:    map[string]any{"maxPods": json.Number("20")},
		},
		{
			name:    "a flag keeps its field",
			running: `,"maxPods":20`,
			files:   []File{{Path: "/c", Own: true, Data: []byte(header + "maxPods: 30\n")}},
			flags:   map[string]string{"max-pods": "20"},
			next:    header + "maxPods: 50\n",
			want:    map[string]any{"maxPods": json.Number("20")},
		},
		{
			name:    "a flag at the value the files give decides nothing",
			running: `,"maxPods":110`,
			files:   []File{{Path: "/c", Own: true, Data: []byte(header)}},
			flags:   map[string]string{"max-pods": "110"},
			next:    header + "maxPods: 50\n",
			want:    map[string]any{"maxPods": json.Number("50")},
		},
		{
			name:  "maps merge key by key over the defaulted base",
			files: []File{{Path: "/c", Data: []byte(header)}, {Path: "/d/90.conf", Own: true, DropIn: true}},
			next:  header + "evictionHard:\n  memory.available: 1Gi\n",
			want: map[string]any{"evictionHard": map[string]any{"memory.available": "1Gi", "nodefs.available": "10%",
				"nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := Observed{Config: configz(t, tt.running), Files: tt.files, Flags: tt.flags}
			var next []byte
			if tt.next != "" {
				next = []byte(tt.next)
			}
			out, err := Predict(obs, next)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fieldMap(out)
			if err != nil {
				t.Fatal(err)
			}
			for field, want := range tt.want {
				if !sameValue(got[field], want) {
					t.Errorf("%s = %v, want %v", field, got[field], want)
				}
			}
		})
	}
}

// TestPredictClassifiesTheWholePicture is the case docs/agent.md used to
// leave out: in drop-in mode, a base file with the static CPU manager and a
// drop-in asking none is a change that needs the drain, which comparing the
// drop-ins alone (nothing set before, none after) never saw.
func TestPredictClassifiesTheWholePicture(t *testing.T) {
	base := File{Path: "/var/lib/kubelet/config.yaml", Data: []byte(header + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")}
	own := File{Path: "/etc/kubernetes/kubelet.conf.d/90-nodeguard.conf", Own: true, DropIn: true}
	obs := Observed{Config: configz(t, `,"cpuManagerPolicy":"static","reservedSystemCPUs":"0"`), Files: []File{base, own}}
	next := []byte(header + "cpuManagerPolicy: none\n")
	if plan, _ := disruption.ClassifyFiles(nil, next); plan.Drain {
		t.Fatalf("the drop-ins alone: %+v; the test no longer shows the gap", plan)
	}
	predicted, err := Predict(obs, next)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := disruption.ClassifyFiles(obs.Config, predicted)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Drain || len(plan.StateFiles) != 1 || plan.StateFiles[0] != "cpu_manager_state" {
		t.Fatalf("plan = %+v, want a drain removing cpu_manager_state", plan)
	}
}

func TestPredictWithoutTheAgentsFile(t *testing.T) {
	if _, err := Predict(Observed{Config: configz(t, ""), Files: []File{{Path: "/c"}}}, nil); !errors.Is(err, ErrOwnNotRead) {
		t.Errorf("no own file: %v", err)
	}
	if _, err := Predict(Observed{Config: configz(t, ""), NotReadingOwn: "elsewhere"}, nil); !errors.Is(err, ErrOwnNotRead) {
		t.Errorf("not read: %v", err)
	}
}
