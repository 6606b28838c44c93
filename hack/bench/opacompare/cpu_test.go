package opacompare

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestProcessCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU times come from /proc")
	}
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the process's CPU time moves by at least two ticks.
	deadline := time.Now().Add(10 * time.Second)
	var after time.Duration
	for x := 0; time.Now().Before(deadline); x++ {
		if x%1_000_000 == 0 {
			if after, err = processCPU(os.Getpid()); err != nil {
				t.Fatal(err)
			}
			if after-before >= 20*time.Millisecond {
				return
			}
		}
	}
	t.Fatalf("CPU time went from %v to %v in 10 s of spinning", before, after)
}

func TestProcessCPUOfAMissingProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU times come from /proc")
	}
	// Process IDs stop below 2^22 on Linux.
	if _, err := processCPU(1 << 30); err == nil {
		t.Fatal("no error for a process that cannot exist")
	}
}

func TestCPUSpeedup(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name      string
		ours, opa []time.Duration
		want      float64
	}{
		{"median of the rounds", []time.Duration{100 * ms, 200 * ms, 100 * ms}, []time.Duration{400 * ms, 300 * ms, 250 * ms}, 2.5},
		{"not measured", nil, nil, 0},
		{"rounds that used no measurable CPU are left out", []time.Duration{0, 100 * ms}, []time.Duration{300 * ms, 300 * ms}, 3},
		{"nothing measurable", []time.Duration{0}, []time.Duration{300 * ms}, 0},
		{"mismatched rounds", []time.Duration{100 * ms}, nil, 0},
	} {
		if got := (Row{OursCPU: tc.ours, OPACPU: tc.opa}).CPUSpeedup(); got != tc.want {
			t.Errorf("%s: CPUSpeedup = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := cpuPerRequest([]time.Duration{30 * ms, 10 * ms, 20 * ms}, 1000); got != 20*time.Microsecond {
		t.Errorf("cpuPerRequest = %v, want the median round's 20µs", got)
	}
}

func TestCPUCeiling(t *testing.T) {
	ms := time.Millisecond
	row := Row{OPACPU: []time.Duration{300 * ms, 400 * ms, 330 * ms}, FloorCPU: []time.Duration{100 * ms, 100 * ms, 110 * ms}}
	if got := row.CPUCeiling(); got != 3 {
		t.Errorf("CPUCeiling = %v, want the median round's 3", got)
	}
	if got := (Row{OPACPU: row.OPACPU}).CPUCeiling(); got != 0 {
		t.Errorf("CPUCeiling without a floor = %v, want 0", got)
	}
}
