package scale

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseSample(t *testing.T) {
	for _, tc := range []struct {
		line   string
		name   string
		labels map[string]string
		value  float64
	}{
		{`nodeguard_http_requests_total{code="200",endpoint="/authorize"} 42`, "nodeguard_http_requests_total", map[string]string{"code": "200", "endpoint": "/authorize"}, 42},
		{`up 1`, "up", map[string]string{}, 1},
		{`m{a="x\"y",b="z,}"} 1.5e3 1700000000`, "m", map[string]string{"a": `x"y`, "b": "z,}"}, 1500},
	} {
		s, err := parseSample(tc.line)
		if err != nil {
			t.Fatalf("parseSample(%q): %v", tc.line, err)
		}
		if s.name != tc.name || s.value != tc.value || len(s.labels) != len(tc.labels) {
			t.Errorf("parseSample(%q) = %+v", tc.line, s)
		}
		for k, v := range tc.labels {
			if s.labels[k] != v {
				t.Errorf("parseSample(%q): label %s = %q, want %q", tc.line, k, s.labels[k], v)
			}
		}
	}
	for _, bad := range []string{`m{a="x} 1`, `m{a} 1`, `m`, `m{a="x"}`, `m nope`} {
		if _, err := parseSample(bad); err == nil {
			t.Errorf("parseSample(%q) succeeded", bad)
		}
	}
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := quantile(d, q); got != want {
			t.Errorf("quantile(1..100 ms, %v) = %v, want %v", q, got, want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

func TestAssignedSpreadsTheFraction(t *testing.T) {
	var picked []int
	for i := range 50 {
		if assigned(i, 0.1) {
			picked = append(picked, i)
		}
	}
	if want := []int{9, 19, 29, 39, 49}; !slices.Equal(picked, want) {
		t.Errorf("assigned nodes %v, want %v", picked, want)
	}
}

func TestPlanReusesOnlyShippedThenDown(t *testing.T) {
	o := Options{Modes: []Mode{ModeNone, ModeShipped, ModeWebhookDown, ModeWebhookDown}, ReuseCluster: true}
	var phases [][]Mode
	for _, s := range plan(o) {
		phases = append(phases, s.phases)
	}
	want := [][]Mode{{ModeNone}, {ModeShipped, ModeWebhookDown}, {ModeWebhookDown}}
	if !slices.EqualFunc(phases, want, slices.Equal) {
		t.Errorf("plan with reuse = %v, want %v", phases, want)
	}
	o.ReuseCluster = false
	if n := len(plan(o)); n != 4 {
		t.Errorf("without reuse, %d sessions, want 4", n)
	}
}

func TestDeploymentArgsKeptAreTuning(t *testing.T) {
	for arg, out := range map[string]bool{
		"--secure-port=8443": true, "--tls-cert-file=/x": true, "--client-ca-file=/y": true,
		"--settings=/z": true, "--shutdown-drain-duration=5s": true, "-v=2": true,
		"--max-validate-in-flight=16": false, "--graph-stale-after=30s": false, "--settingsx=x": false,
	} {
		if leftOut(arg) != out {
			t.Errorf("leftOut(%q) = %v, want %v", arg, !out, out)
		}
	}
}

func TestParseModes(t *testing.T) {
	modes, err := ParseModes("none, shipped,min-version,webhook-down")
	if err != nil || !slices.Equal(modes, []Mode{ModeNone, ModeShipped, ModeMinVersion, ModeWebhookDown}) {
		t.Errorf("ParseModes = %v, %v", modes, err)
	}
	if _, err := ParseModes("shipped,down"); err == nil {
		t.Error("ParseModes accepted an unknown mode")
	}
}

// TestStatusPeriod: the kubelets patch their status every period unless a
// status period of its own is given, and the warm-up must cover the longer
// of the two.
func TestStatusPeriod(t *testing.T) {
	base := Options{Modes: []Mode{ModeShipped}, Nodes: 1, Period: 10 * time.Second, Warmup: 10 * time.Second, Window: time.Minute, WorkDir: "/tmp"}
	if err := base.validate(); err != nil {
		t.Fatalf("base options: %v", err)
	}
	if got := base.statusPeriod(); got != base.Period {
		t.Errorf("status period %s, want the period %s", got, base.Period)
	}
	quiet := base
	quiet.StatusPeriod = 5 * time.Minute
	if got := quiet.statusPeriod(); got != 5*time.Minute {
		t.Errorf("status period %s, want 5m", got)
	}
	if err := quiet.validate(); err == nil {
		t.Error("a warm-up shorter than the status period passed")
	}
	quiet.Warmup = 5 * time.Minute
	if err := quiet.validate(); err != nil {
		t.Errorf("a warm-up as long as the status period: %v", err)
	}
	negative := base
	negative.StatusPeriod = -time.Second
	if err := negative.validate(); err == nil {
		t.Error("a negative status period passed")
	}
	r := RolloutOptions{Period: 10 * time.Second, StatusPeriod: 5 * time.Minute}
	if got := r.fleetOptions().statusPeriod(); got != 5*time.Minute {
		t.Errorf("rollout's fleet status period %s, want 5m", got)
	}
}

func TestTimedReactionsFromBuckets(t *testing.T) {
	buckets := map[float64]float64{0.01: 50, 0.1: 90, 0.2: 97, 0.5: 99, 1: 100, math.Inf(1): 100}
	got := timedReactions(buckets, 100, 5)
	want := TimedReactions{Count: 100, MeanMs: 50, Over200ms: 3, P99AtMostMs: 500}
	if got != want {
		t.Errorf("timedReactions = %+v, want %+v", got, want)
	}
	if got := timedReactions(map[float64]float64{}, 0, 0); got != (TimedReactions{}) {
		t.Errorf("no reactions: %+v", got)
	}
}

// The controller's rate-limiter wait is its Node patches' and status
// writes', with its Events' (POST, paced on purpose) apart.
func TestControllerMetricsKeepTheEventsLimiterApart(t *testing.T) {
	const metrics = `rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="PATCH",le="0.025"} 9
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="PATCH",le="0.1"} 10
rest_client_rate_limiter_duration_seconds_sum{host="h",verb="PATCH"} 0.2
rest_client_rate_limiter_duration_seconds_count{host="h",verb="PATCH"} 10
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="PUT",le="0.025"} 10
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="PUT",le="0.1"} 10
rest_client_rate_limiter_duration_seconds_sum{host="h",verb="PUT"} 0
rest_client_rate_limiter_duration_seconds_count{host="h",verb="PUT"} 10
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.025"} 1
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.1"} 1
rest_client_rate_limiter_duration_seconds_sum{host="h",verb="POST"} 40
rest_client_rate_limiter_duration_seconds_count{host="h",verb="POST"} 20
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(metrics)) }))
	defer srv.Close()
	var r RolloutResult
	readControllerMetrics(t.Context(), srv.URL, &r)
	if want := (ClientThrottle{Requests: 20, MeanMs: 10, Over25ms: 1, Over100ms: 0}); r.Throttle != want {
		t.Errorf("writes' limiter %+v, want %+v", r.Throttle, want)
	}
	if want := (ClientThrottle{Requests: 20, MeanMs: 2000, Over25ms: 19, Over100ms: 19}); r.EventThrottle != want {
		t.Errorf("Events' limiter %+v, want %+v", r.EventThrottle, want)
	}
}

// renice reaches every thread of a running Go program, not only its main
// thread. The child is this test binary, parked in TestReniceChild with
// several threads.
func TestReniceSetsEveryThread(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestReniceChild$")
	cmd.Env = append(os.Environ(), "SCALE_RENICE_CHILD=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	var tasks []os.DirEntry
	for range 100 {
		tasks, _ = os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if len(tasks) >= 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(tasks) < 3 {
		t.Fatalf("the child runs %d threads, want several", len(tasks))
	}
	const nice = 7 // above 0: no privilege needed
	if err := renice(pid, nice); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		// The raw system call returns 20 - nice.
		if got, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid); err != nil || 20-got != nice {
			t.Errorf("thread %d: nice %d (%v), want %d", tid, 20-got, err, nice)
		}
	}
}

func TestReniceChild(t *testing.T) {
	if os.Getenv("SCALE_RENICE_CHILD") != "1" {
		t.Skip("the child of TestReniceSetsEveryThread")
	}
	for range 4 {
		go func() {
			runtime.LockOSThread()
			select {}
		}()
	}
	time.Sleep(time.Minute)
}

// Options a rollout cannot run with are refused before anything starts,
// each with what is wrong.
func TestRolloutOptionsRefuseWhatCannotRun(t *testing.T) {
	valid := RolloutOptions{Nodes: 10, Trial: time.Second, MaxUnavailablePercent: 10, Canary: 1,
		Period: 10 * time.Second, Timeout: time.Minute, WorkDir: "/tmp", ControllerNice: -10}
	if err := valid.validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(*RolloutOptions)
		says string
	}{
		"nice below -20":       {func(o *RolloutOptions) { o.ControllerNice = -21 }, "controller nice -21"},
		"nice above 19":        {func(o *RolloutOptions) { o.ControllerNice = 20 }, "controller nice 20"},
		"one Node":             {func(o *RolloutOptions) { o.Nodes = 1 }, "nodes must be at least 2"},
		"canary of every Node": {func(o *RolloutOptions) { o.Canary = 10 }, "canary 10"},
		"no work directory":    {func(o *RolloutOptions) { o.WorkDir = "" }, "work directory"},
	} {
		o := valid
		tc.edit(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: validate() = %v, want an error saying %q", name, err, tc.says)
		}
	}
}
