package policy

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2/ktesting"
)

const denyAll = `package nodeguard.admission

deny contains "first"
`

const denyAllV2 = `package nodeguard.admission

deny contains "second"
`

// broken has a parse error on line 4.
const broken = `package nodeguard.admission

deny contains msg if {
	msg := "unterminated
}
`

func admissionDenials(t *testing.T, e *Engine) []string {
	t.Helper()
	res, err := e.EvalAdmission(context.Background(), &AdmissionInput{Request: configMapRequest("CREATE", "default", "x", `{}`)})
	if err != nil {
		t.Fatalf("EvalAdmission: %v", err)
	}
	var msgs []string
	for _, v := range res.Deny {
		msgs = append(msgs, v.Message)
	}
	return msgs
}

func TestShippedPoliciesLoad(t *testing.T) {
	e, err := New(testContext(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(); err != nil {
		t.Fatalf("shipped policies are not ready: %v", err)
	}
	if e.Source() != SourceEmbedded || e.Hash() == "" {
		t.Errorf("source %q hash %q", e.Source(), e.Hash())
	}
	set := e.active.Load()
	if !set.hasAdmission || !set.hasAuthz {
		t.Errorf("shipped set: admission %v authz %v, want both", set.hasAdmission, set.hasAuthz)
	}
	// Test files are not served.
	if set.files != 5 {
		t.Errorf("shipped set has %d files, want 5 (lib and four policies)", set.files)
	}
}

func TestBrokenReloadKeepsLastGoodSet(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := logr.NewContext(context.Background(), logger)
	e, dir := newEngine(t, map[string]string{"policy.rego": denyAll}, Options{Metrics: metrics})
	if err := e.Ready(); err != nil {
		t.Fatal(err)
	}
	goodHash := e.Hash()
	if got := testutil.ToFloat64(metrics.lastLoadSuccess); got != 1 {
		t.Errorf("last_load_success = %v after a good load", got)
	}

	writeFiles(t, dir, map[string]string{"policy.rego": broken})
	err = e.Reload(ctx)
	var loadErr *LoadError
	if !errors.As(err, &loadErr) {
		t.Fatalf("Reload of a broken set: %v, want a *LoadError", err)
	}
	wantFile := filepath.Join(dir, "policy.rego")
	if len(loadErr.Problems) == 0 || loadErr.Problems[0].File != wantFile || loadErr.Problems[0].Line != 4 {
		t.Errorf("problems = %+v, want %s line 4", loadErr.Problems, wantFile)
	}
	if !strings.Contains(err.Error(), wantFile+":4") {
		t.Errorf("error %q does not name %s:4", err, wantFile)
	}
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	for _, want := range []string{"Policy set rejected", "Policy problem", `file="` + wantFile + `"`, "line=4", "rego_parse_error"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs do not contain %s:\n%s", want, logs)
		}
	}
	if got := e.LoadError(); got == nil || got.Error() != err.Error() {
		t.Errorf("LoadError() = %v, want %v", got, err)
	}
	// Still ready, still serving the good set.
	if err := e.Ready(); err != nil {
		t.Errorf("Ready after a broken reload: %v", err)
	}
	if e.Hash() != goodHash {
		t.Errorf("hash changed to %s after a broken reload", e.Hash())
	}
	if got := admissionDenials(t, e); len(got) != 1 || got[0] != "first" {
		t.Errorf("denials after broken reload = %v, want [first]", got)
	}
	if got := testutil.ToFloat64(metrics.loadErrors); got != 1 {
		t.Errorf("load_errors_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.lastLoadSuccess); got != 0 {
		t.Errorf("last_load_success = %v after a failed load", got)
	}
	if got := testutil.ToFloat64(metrics.info.WithLabelValues(dir, goodHash)); got != 1 {
		t.Errorf("info{hash=%s} = %v, want 1 for the set in service", goodHash, got)
	}

	// A fixed set goes into service.
	writeFiles(t, dir, map[string]string{"policy.rego": denyAllV2})
	if err := e.Reload(ctx); err != nil {
		t.Fatalf("Reload of a fixed set: %v", err)
	}
	if e.LoadError() != nil {
		t.Errorf("LoadError() = %v after a good load", e.LoadError())
	}
	if got := admissionDenials(t, e); len(got) != 1 || got[0] != "second" {
		t.Errorf("denials after reload = %v, want [second]", got)
	}
	if got := testutil.CollectAndCount(metrics.info); got != 1 {
		t.Errorf("info has %d series, want 1", got)
	}
}

func TestNeverLoadedEngineIsNotReady(t *testing.T) {
	e, dir := newEngine(t, map[string]string{"policy.rego": broken}, Options{})
	err := e.Ready()
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("Ready() = %v, want ErrNotReady", err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, "policy.rego")+":4") {
		t.Errorf("Ready() error %q does not carry the problem", err)
	}
	if err := e.HealthChecker().Check(nil); !errors.Is(err, ErrNotReady) {
		t.Errorf("health check = %v, want ErrNotReady", err)
	}
	_, err = e.EvalAdmission(context.Background(), &AdmissionInput{Request: configMapRequest("CREATE", "default", "x", `{}`)})
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("EvalAdmission before any load = %v, want ErrNotReady", err)
	}
	if _, err := e.EvalAuthz(context.Background(), &AuthzInput{Spec: configMapRead("u", nil, "ns", "n")}); !errors.Is(err, ErrNotReady) {
		t.Errorf("EvalAuthz before any load = %v, want ErrNotReady", err)
	}

	writeFiles(t, dir, map[string]string{"policy.rego": denyAll})
	if err := e.Reload(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(); err != nil {
		t.Errorf("Ready() after a good load = %v", err)
	}
	if err := e.HealthChecker().Check(nil); err != nil {
		t.Errorf("health check after a good load = %v", err)
	}
}

// TestLoadProblems checks that each kind of bad set is refused with the
// file and line of the problem.
func TestLoadProblems(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		wantFile string // relative to the directory; "" for the directory
		wantLine int
		wantText string
	}{
		{
			name:     "parse error",
			files:    map[string]string{"ok.rego": denyAll, "sub/bad.rego": broken},
			wantFile: "sub/bad.rego", wantLine: 4, wantText: "rego_parse_error",
		},
		{
			name: "type error",
			files: map[string]string{"bad.rego": `package nodeguard.admission

deny contains msg if {
	msg := upper(42)
}
`},
			wantFile: "bad.rego", wantLine: 4, wantText: "rego_type_error",
		},
		{
			name: "unknown function",
			files: map[string]string{"bad.rego": `package nodeguard.authz

deny contains "x" if nodeguard.pods("n")
`},
			wantFile: "bad.rego", wantLine: 3, wantText: "undefined function nodeguard.pods",
		},
		{
			name: "network built-in",
			files: map[string]string{"bad.rego": `package nodeguard.authz

deny contains "x" if http.send({"method": "get", "url": "http://127.0.0.1"})
`},
			wantFile: "bad.rego", wantLine: 3, wantText: "undefined function http.send",
		},
		{
			name: "v0 style deny is an object, not a set",
			files: map[string]string{"bad.rego": `package nodeguard.admission

deny[msg] := true if {
	msg := "x"
}
`},
			wantFile: "bad.rego", wantLine: 3, wantText: "must be a set",
		},
		{
			name: "single-value deny",
			files: map[string]string{"bad.rego": `package nodeguard.authz

deny := {"x"}
`},
			wantFile: "bad.rego", wantLine: 3, wantText: "must be a set",
		},
		{
			name: "allow as a set",
			files: map[string]string{"bad.rego": `package nodeguard.authz

allow contains "x"
`},
			wantFile: "bad.rego", wantLine: 3, wantText: "must be a boolean",
		},
		{
			name: "unsupported reachable kind",
			files: map[string]string{"bad.rego": `package nodeguard.authz

deny contains "x" if {
	not nodeguard.reachable("n", "secret", "ns", "name")
}
`},
			wantFile: "bad.rego", wantLine: 4, wantText: `kind "secret" is not supported`,
		},
		{
			name: "unsupported reachable kind in an assignment",
			files: map[string]string{"bad.rego": `package nodeguard.authz

deny contains "x" if {
	ok := nodeguard.reachable("n", "pod", "ns", "name")
	not ok
}
`},
			wantFile: "bad.rego", wantLine: 4, wantText: `kind "pod" is not supported`,
		},
		{
			name:     "no policy files",
			files:    map[string]string{"only_test.rego": "package x_test\n", "README.md": "hi"},
			wantFile: "", wantText: "no policy files",
		},
		{
			name: "rule conflicts with data",
			files: map[string]string{"config.rego": `package nodeguard.config

allowed_namespaces := ["x"]
`},
			wantFile: "config.rego", wantLine: 3, wantText: "conflicting rule for data path nodeguard/config/allowed_namespaces",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Data: map[string]any{"nodeguard": map[string]any{"config": map[string]any{"allowed_namespaces": []string{"a"}}}}}
			e, dir := newEngine(t, tt.files, opts)
			err := e.LoadError()
			var loadErr *LoadError
			if !errors.As(err, &loadErr) {
				t.Fatalf("LoadError() = %v, want a *LoadError", err)
			}
			if e.Ready() == nil {
				t.Error("engine with a bad set is ready")
			}
			wantFile := dir
			if tt.wantFile != "" {
				wantFile = filepath.Join(dir, tt.wantFile)
			}
			for _, p := range loadErr.Problems {
				if p.File == wantFile && (tt.wantLine == 0 || p.Line == tt.wantLine) && strings.Contains(p.String(), tt.wantText) {
					return
				}
			}
			t.Errorf("no problem at %s:%d mentioning %q in %v", wantFile, tt.wantLine, tt.wantText, err)
		})
	}
}

func TestMissingDirectoryIsNotReady(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	e, err := New(testContext(t), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Ready() = %v, want an error naming %s", err, dir)
	}
}

func TestBadOptions(t *testing.T) {
	for _, opts := range []Options{
		{Timeout: -1},
		{PollInterval: -1},
		{Data: map[string]any{"x": func() {}}},
	} {
		if _, err := New(testContext(t), opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}

// TestRunPicksUpChanges edits the directory the way an operator does, and
// the way Kubernetes updates a ConfigMap volume (a symlink swap), and waits
// for Run to notice.
func TestRunPicksUpChanges(t *testing.T) {
	dir := t.TempDir()
	// The ConfigMap volume layout: data in a timestamped hidden directory,
	// "..data" pointing at it, visible names pointing through "..data".
	writeFiles(t, dir, map[string]string{"..2024_01_01/policy.rego": denyAll})
	mustSymlink(t, "..2024_01_01", filepath.Join(dir, "..data"))
	mustSymlink(t, filepath.Join("..data", "policy.rego"), filepath.Join(dir, "policy.rego"))

	e, err := New(testContext(t), Options{Dir: dir, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(); err != nil {
		t.Fatal(err)
	}
	if got := e.active.Load().files; got != 1 {
		t.Errorf("loaded %d files, want 1 (hidden directories are skipped)", got)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	first := e.Hash()
	writeFiles(t, dir, map[string]string{"..2024_01_02/policy.rego": denyAllV2})
	mustSymlink(t, "..2024_01_02", filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the swapped ConfigMap content to load", func() bool { return e.Hash() != first })
	if got := admissionDenials(t, e); len(got) != 1 || got[0] != "second" {
		t.Errorf("denials after swap = %v, want [second]", got)
	}

	// A broken edit is reported and does not replace the set.
	second := e.Hash()
	writeFiles(t, dir, map[string]string{"extra.rego": broken})
	eventually(t, "the broken file to be reported", func() bool { return e.LoadError() != nil })
	if e.Hash() != second {
		t.Error("a broken edit replaced the set in service")
	}
	if err := os.Remove(filepath.Join(dir, "extra.rego")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the fix to load", func() bool { return e.LoadError() == nil })
}

func TestRunWithEmbeddedPoliciesWaits(t *testing.T) {
	e, err := New(testContext(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	cancel()
	if err := e.Run(ctx); err != nil {
		t.Errorf("Run = %v", err)
	}
}

func TestDataOption(t *testing.T) {
	policy := `package nodeguard.admission

deny contains ns if {
	some ns in data.nodeguard.config.allowed_namespaces
}
`
	e, _ := newEngine(t, map[string]string{"p.rego": policy}, Options{
		Data: map[string]any{"nodeguard": map[string]any{"config": map[string]any{"allowed_namespaces": []string{"a", "b"}}}},
	})
	if got := admissionDenials(t, e); strings.Join(got, ",") != "a,b" {
		t.Errorf("denials = %v, want [a b] from Options.Data", got)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// racingFS lets a test change the real directory between the moment a read
// lists it and the moment it reads the files listed: the window a poll can
// meet when an operator edits the directory.
type racingFS struct {
	fs.FS
	mu        sync.Mutex
	afterList func()
}

func (r *racingFS) ReadDir(name string) ([]fs.DirEntry, error) {
	entries, err := fs.ReadDir(r.FS, name)
	r.mu.Lock()
	hook := r.afterList
	r.afterList = nil
	r.mu.Unlock()
	if hook != nil && name == "." {
		hook()
	}
	return entries, err
}

// TestReadRacingAChangeIsTriedAgain removes a broken file and fixes another
// while a read is between listing and reading: that read fails on the file
// gone, and the next poll, which finds the finished change, loads it.
func TestReadRacingAChangeIsTriedAgain(t *testing.T) {
	e, dir := newEngine(t, map[string]string{"policy.rego": denyAll}, Options{})
	ctx := testContext(t)
	writeFiles(t, dir, map[string]string{"broken.rego": broken})
	if err := e.load(ctx, false); err == nil {
		t.Fatal("a set with a broken file loaded")
	}

	race := &racingFS{FS: e.fsys}
	race.afterList = func() {
		if err := os.Remove(filepath.Join(dir, "broken.rego")); err != nil {
			t.Error(err)
		}
		writeFiles(t, dir, map[string]string{"policy.rego": denyAllV2})
	}
	e.fsys = race
	err := e.load(ctx, false)
	if err == nil || !strings.Contains(err.Error(), "broken.rego") {
		t.Fatalf("the read that lost broken.rego under it = %v, want its problem", err)
	}
	if got := admissionDenials(t, e); len(got) != 1 || got[0] != "first" {
		t.Fatalf("denials after the failed read = %v, want the last good set's [first]", got)
	}

	if err := e.load(ctx, false); err != nil {
		t.Fatalf("the poll after the change finished = %v, want the fixed set loaded", err)
	}
	if got := admissionDenials(t, e); len(got) != 1 || got[0] != "second" {
		t.Errorf("denials after the next poll = %v, want [second]", got)
	}

	// A problem that stays the same is not tried again on every poll: the
	// second poll finds nothing new and returns without loading.
	writeFiles(t, dir, map[string]string{"huge.rego": strings.Repeat("#", maxFileBytes+1)})
	if err := e.load(ctx, false); err == nil || !strings.Contains(err.Error(), "huge.rego") {
		t.Fatalf("a file over the size limit = %v, want its problem", err)
	}
	if err := e.load(ctx, false); err != nil {
		t.Errorf("the poll after an unchanged problem = %v, want no new attempt", err)
	}
	if err := e.LoadError(); err == nil || !strings.Contains(err.Error(), "huge.rego") {
		t.Errorf("LoadError = %v, want the oversize file still reported", err)
	}
}
