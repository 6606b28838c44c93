package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/durable"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/effective"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/bootclock"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

const (
	localConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nhealthzPort: 10248\nproviderID: node-1\n"
	goodA       = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nregistryPullQPS: 7\n"
	goodB       = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nregistryPullQPS: 8\n"
	invalid     = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPodz: 50\n"
)

var (
	testTerms       = trial.Terms{Period: 10 * time.Minute, Grace: time.Minute, FailureThreshold: 3}
	testProbePeriod = 5 * time.Second
	// testDrainTimeout bounds drains in these tests.
	testDrainTimeout = 2 * time.Minute
	kubeletVersion   = version.MustParseGeneric("1.37.2")
	errUnhealthy     = errors.New("connection refused")
)

// quiet drops the reconciler's logs: the assertions say what matters.
func quiet(ctx context.Context) context.Context { return klog.NewContext(ctx, logr.Discard()) }

// fakeRestarter counts restarts (a start after a stop counts as one) and
// fails while err is set; log, when set, gets "restart", "stop", "start".
type fakeRestarter struct {
	count int
	err   error
	log   *[]string
	// started, when set, is told of each start of the kubelet.
	started func()
}

func (r *fakeRestarter) note(what string) {
	if r.log != nil {
		*r.log = append(*r.log, what)
	}
}

func (r *fakeRestarter) Restart(context.Context) error {
	if r.err != nil {
		return r.err
	}
	r.count++
	r.note("restart")
	if r.started != nil {
		r.started()
	}
	return nil
}

func (r *fakeRestarter) Stop(context.Context) error {
	if r.err != nil {
		return r.err
	}
	r.note("stop")
	return nil
}

func (r *fakeRestarter) Start(context.Context) error {
	if r.err != nil {
		return r.err
	}
	r.count++
	r.note("start")
	if r.started != nil {
		r.started()
	}
	return nil
}

// fakeProber answers with err (nil: healthy).
type fakeProber struct {
	err   error
	count int
}

func (p *fakeProber) Probe(context.Context) error {
	p.count++
	return p.err
}

// fakeRunning is the kubelet's /configz: the kubelet file as the kubelet
// read it at its last start (as it is on disk until the agent restarts
// it), with the fields its command line sets over it.
type fakeRunning struct {
	path string
	// read is the file at the kubelet's last start; nil before one.
	read    []byte
	started bool
	// flags are fields the kubelet's command line sets, with /flagz.
	flags     map[string]any
	flagz     map[string]string
	err       error
	readCount int
}

func (f *fakeRunning) start() {
	f.read, _ = os.ReadFile(f.path)
	f.started = true
}

func (f *fakeRunning) Read(context.Context) (effective.Observed, error) {
	f.readCount++
	if f.err != nil {
		return effective.Observed{}, f.err
	}
	current, _ := os.ReadFile(f.path)
	runs := f.read
	if !f.started {
		runs = current
	}
	fields := map[string]any{}
	if len(runs) > 0 {
		if err := yaml.Unmarshal(runs, &fields); err != nil {
			return effective.Observed{}, err
		}
	}
	maps.Copy(fields, f.flags)
	fields["apiVersion"], fields["kind"] = "kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"
	body, err := json.Marshal(map[string]any{effective.ConfigzKey: fields})
	if err != nil {
		return effective.Observed{}, err
	}
	config, err := effective.ParseConfigz(body)
	if err != nil {
		return effective.Observed{}, err
	}
	return effective.Observed{Config: config, Flags: f.flagz, Files: []effective.File{{Path: f.path, Data: current, Own: true}}}, nil
}

// env is one node: a state dir, a kubelet file, a clock, a kubelet.
type env struct {
	t          *testing.T
	dir        string
	kubeletCfg string
	clock      *bootclock.Fake
	restarter  *fakeRestarter
	prober     *fakeProber
	running    *fakeRunning
	// rootDir is the kubelet's root directory, for its state files.
	rootDir string
	// drainMode is the agent's --drain for the next startAgent.
	drainMode string
	// terms and tuning, when set, are the agent's trial flags for the
	// next startAgent (testTerms and none otherwise).
	terms  *trial.Terms
	tuning trial.NodeSignals
	// drainer is the API behind the Node, for tests that drain.
	drainer   *fakeDrainer
	failpoint func(durable.Step, string) error
	c         *Reconciler
	// lastResult is what the last sync returned.
	lastResult Result
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir())
}

// newEnvIn is newEnv in dir.
func newEnvIn(t *testing.T, dir string) *env {
	t.Helper()
	e := &env{
		t:          t,
		dir:        dir,
		kubeletCfg: filepath.Join(dir, "kubelet", "config.yaml"),
		clock:      bootclock.NewFake("boot-1", time.Hour),
		restarter:  &fakeRestarter{},
		prober:     &fakeProber{},
		rootDir:    filepath.Join(dir, "kubelet-root"),
	}
	e.running = &fakeRunning{path: e.kubeletCfg}
	e.restarter.started = e.running.start
	if err := os.WriteFile(filepath.Join(dir, "local.yaml"), []byte(localConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startAgent()
	return e
}

// startAgent builds a new reconciler on the same state, as a restarted
// agent process would.
func (e *env) startAgent() {
	e.t.Helper()
	store, err := checkpoint.Open(filepath.Join(e.dir, "state"), checkpoint.Options{Failpoint: func(s durable.Step, p string) error {
		if e.failpoint != nil {
			return e.failpoint(s, p)
		}
		return nil
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	terms := testTerms
	if e.terms != nil {
		terms = *e.terms
	}
	e.c, err = New(Config{Trial: terms, TrialTuning: e.tuning, ProbePeriod: testProbePeriod, DrainMode: e.drainMode,
		DrainTimeout: testDrainTimeout, DrainPollPeriod: time.Second}, Deps{
		Store:      store,
		Clock:      e.clock,
		Renderer:   kubelet.Renderer{Mode: kubelet.ModeConfig, LocalConfigFile: filepath.Join(e.dir, "local.yaml"), LocalFields: kubelet.DefaultLocalFields},
		File:       kubelet.ConfigFile{Path: e.kubeletCfg},
		Restarter:  e.restarter,
		Prober:     e.prober,
		Running:    e.running,
		Validator:  Validator{LocalFields: kubelet.DefaultLocalFields},
		StateFiles: kubelet.StateFiles{RootDir: e.rootDir},
		Now:        func() time.Time { return time.Unix(1700000000, 0).Add(e.clock.SinceBoot()) },
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) store() *checkpoint.Store { return e.c.deps.Store }

func (e *env) sync(obs Observation) Result {
	e.t.Helper()
	r, err := e.c.Sync(quiet(e.t.Context()), obs)
	if err != nil {
		e.t.Fatalf("Sync: %v", err)
	}
	e.lastResult = r
	return r
}

// kubeletFile returns the kubelet config file's content ("" when absent).
func (e *env) kubeletFile() string {
	data, err := os.ReadFile(e.kubeletCfg)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

func configMap(name, uid, rv, config string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "kube-system", Name: name, UID: types.UID(uid), ResourceVersion: rv,
			Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue},
		},
		Data: map[string]string{contract.ConfigMapKey: config},
	}
}

func refOf(cm *corev1.ConfigMap) *contract.ConfigMapVersion {
	return &contract.ConfigMapVersion{Namespace: cm.Namespace, Name: cm.Name, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
}

// assigned is the observation of a node assigned cm.
func assigned(cm *corev1.ConfigMap) Observation {
	return Observation{
		Online:         true,
		Assignment:     &contract.Assignment{ConfigMap: contract.ConfigMapRef{Namespace: cm.Namespace, Name: cm.Name}, Key: contract.ConfigMapKey},
		ConfigMap:      cm,
		KubeletVersion: kubeletVersion,
	}
}

var unassigned = Observation{Online: true, KubeletVersion: kubeletVersion}

// expect checks a result.
type expect struct {
	ready    corev1.ConditionStatus
	reason   string
	errorHas string
	active   *contract.ConfigMapVersion
	lkg      *contract.ConfigMapVersion
	assigned *contract.ConfigMapVersion
	restarts int
	// fileHas is a substring of the kubelet file.
	fileHas string
}

func (e *env) check(r Result, want expect) {
	e.t.Helper()
	st := r.Report.Status
	if r.Report.Condition.Status != want.ready || r.Report.Condition.Reason != want.reason {
		e.t.Errorf("condition = %s/%s (%s), want %s/%s", r.Report.Condition.Status, r.Report.Condition.Reason, r.Report.Condition.Message, want.ready, want.reason)
	}
	if want.errorHas == "" && st.Error != "" {
		e.t.Errorf("status error = %q, want none", st.Error)
	}
	if !strings.Contains(st.Error, want.errorHas) {
		e.t.Errorf("status error = %q, want it to mention %q", st.Error, want.errorHas)
	}
	if !contract.SameVersion(st.Active, want.active) {
		e.t.Errorf("active = %v, want %v", describe(st.Active), describe(want.active))
	}
	if !contract.SameVersion(st.LastKnownGood, want.lkg) {
		e.t.Errorf("last-known-good = %v, want %v", describe(st.LastKnownGood), describe(want.lkg))
	}
	if !contract.SameVersion(st.Assigned, want.assigned) {
		e.t.Errorf("assigned = %v, want %v", describe(st.Assigned), describe(want.assigned))
	}
	if e.restarter.count != want.restarts {
		e.t.Errorf("kubelet restarted %d times, want %d", e.restarter.count, want.restarts)
	}
	if !strings.Contains(e.kubeletFile(), want.fileHas) {
		e.t.Errorf("kubelet file does not contain %q:\n%s", want.fileHas, e.kubeletFile())
	}
}

func hasEvent(r Result, reason string) bool {
	for _, ev := range r.Events {
		if ev.Reason == reason {
			return true
		}
	}
	return false
}

// passTrial runs a healthy kubelet through a whole trial.
func (e *env) passTrial(obs Observation) Result {
	e.t.Helper()
	e.prober.err = nil
	e.clock.Step(testTerms.Period)
	r := e.sync(obs)
	if !hasEvent(r, contract.EventTrialPassed) {
		e.t.Fatalf("the trial did not pass: %+v", r.Report.Condition)
	}
	return r
}
