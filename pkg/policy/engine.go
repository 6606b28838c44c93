package policy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/policies"
)

// Defaults for Options. The timeout guards against a runaway policy, not
// latency: well-behaved policies are quick, and a CPU-throttled
// container can stall for a whole CFS period (100ms), which must not turn
// into failed evaluations.
const (
	DefaultTimeout      = time.Second
	DefaultPollInterval = time.Second
)

// SourceEmbedded is LoadError.Source and the metrics' source label for the
// shipped policies compiled into the binary.
const SourceEmbedded = "embedded"

// Options configure an Engine. The zero value serves the shipped policies
// with no graph.
type Options struct {
	// Dir is a directory of policies (the webhook's --policy-dir). Every
	// *.rego file under it, recursively, except *_test.rego and hidden
	// entries, makes up the set; other files are ignored. Empty means the
	// policies shipped in the binary.
	Dir string
	// Graph backs nodeguard.reachable and nodeguard.node. Nil means an
	// empty graph.
	Graph GraphReader
	// Data is put under `data` for policies to read, for instance
	// {"nodeguard": {"config": {"allowed_namespaces": ["kubelet-configs"]}}}.
	// It must be JSON-compatible. A policy rule at the same path is a load
	// error.
	Data map[string]any
	// ExemptNamespaces are the namespaces the admission webhook is not sent
	// (its namespaceSelector). A set whose data.nodeguard.config
	// allowed_namespaces, from Data or from a rule, names one of them does
	// not load. Nil means DefaultExemptNamespaces; empty turns the check off.
	ExemptNamespaces []string
	// Timeout bounds each evaluation, within the caller's own deadline.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// PollInterval is how often Run looks for changes in Dir. Zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Metrics may be nil.
	Metrics *Metrics
}

// ErrNotReady is returned by evaluations before any policy set has loaded.
var ErrNotReady = errors.New("no policy set has loaded yet")

// Engine compiles a policy set once and evaluates it for every review.
// A set that fails to load never replaces a good one. All methods are safe
// for concurrent use.
type Engine struct {
	fsys         fs.FS
	source       string // Dir, or SourceEmbedded
	displayRoot  string // prefix of file names in errors
	graph        GraphReader
	store        storage.Store
	caps         *ast.Capabilities
	timeout      time.Duration
	pollInterval time.Duration
	metrics      *Metrics
	// exemptNamespaces may not be allowed_namespaces.
	exemptNamespaces []string

	// active is the set in service; nil until one has loaded.
	active atomic.Pointer[preparedSet]
	// lastErr is the error of the latest load, nil when it succeeded.
	lastErr atomic.Pointer[LoadError]

	// mu serialises loads; attempted is the attemptKey of the last
	// snapshot tried.
	mu        sync.Mutex
	attempted string
}

// preparedSet is a compiled policy set with its queries prepared.
type preparedSet struct {
	hash         string
	files        int
	admission    rego.PreparedEvalQuery
	authz        rego.PreparedEvalQuery
	hasAdmission bool
	hasAuthz     bool
}

// New builds an engine and loads its policies once. A set that does not
// load is not an error here: it is logged, counted, and reported by Ready
// and LoadError, and Run picks up a fixed one. Only bad options are errors.
func New(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Timeout < 0 || opts.PollInterval < 0 {
		return nil, fmt.Errorf("policy engine: timeout and poll interval must not be negative")
	}
	e := &Engine{
		graph:        opts.Graph,
		caps:         Capabilities(),
		timeout:      cmp.Or(opts.Timeout, DefaultTimeout),
		pollInterval: cmp.Or(opts.PollInterval, DefaultPollInterval),
		metrics:      opts.Metrics,
	}
	e.exemptNamespaces = slices.Clone(opts.ExemptNamespaces)
	if opts.ExemptNamespaces == nil {
		e.exemptNamespaces = DefaultExemptNamespaces()
	}
	if opts.Dir == "" {
		e.fsys, e.source, e.displayRoot = policies.FS(), SourceEmbedded, "policies"
	} else {
		// Resolved now, so that a later change of working directory cannot
		// move the policies; errors keep naming the directory as given.
		abs, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("policy engine: policy directory %q: %w", opts.Dir, err)
		}
		e.fsys, e.source, e.displayRoot = os.DirFS(abs), opts.Dir, opts.Dir
	}
	store, err := newStore(ctx, opts.Data)
	if err != nil {
		return nil, fmt.Errorf("policy engine: %w", err)
	}
	e.store = store
	_ = e.load(ctx, true)
	return e, nil
}

func newStore(ctx context.Context, data map[string]any) (storage.Store, error) {
	store := inmem.NewWithOpts(inmem.OptReturnASTValuesOnRead(true))
	if len(data) == 0 {
		return store, nil
	}
	// A round trip through JSON turns typed Go values ([]string, structs)
	// into the JSON values the store holds, and rejects what JSON cannot say.
	var doc any = data
	if err := util.RoundTrip(&doc); err != nil {
		return nil, fmt.Errorf("data is not JSON-compatible: %w", err)
	}
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return nil, fmt.Errorf("writing data: %w", err)
	}
	if err := store.Write(ctx, txn, storage.AddOp, storage.RootPath, doc); err != nil {
		store.Abort(ctx, txn)
		return nil, fmt.Errorf("writing data: %w", err)
	}
	if err := store.Commit(ctx, txn); err != nil {
		return nil, fmt.Errorf("writing data: %w", err)
	}
	return store, nil
}

// Source is the policy directory, or SourceEmbedded.
func (e *Engine) Source() string { return e.source }

// Hash identifies the set in service, "" before one has loaded.
func (e *Engine) Hash() string {
	if set := e.active.Load(); set != nil {
		return set.hash
	}
	return ""
}

// Reload reads and compiles the policies now, even if they look unchanged,
// and returns the load error, if any. The set in service changes only on
// success.
func (e *Engine) Reload(ctx context.Context) error { return e.load(ctx, true) }

// Run polls the policy directory every PollInterval and loads a changed set,
// until ctx ends. Content hashes, not modification times, tell a change, so
// a ConfigMap volume's atomic symlink swap is seen like any edit. With the
// embedded policies there is nothing to watch and Run only waits.
func (e *Engine) Run(ctx context.Context) error {
	if e.source == SourceEmbedded {
		<-ctx.Done()
		return nil
	}
	ticker := time.NewTicker(e.pollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			_ = e.load(ctx, false)
		}
	}
}

// Ready fails until a policy set has loaded; once one has, it passes even
// while later sets fail to load, since the last good set keeps serving
// (LoadError and the metrics report those). Its error carries the problems.
func (e *Engine) Ready() error {
	if e.active.Load() != nil {
		return nil
	}
	if err := e.lastErr.Load(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return ErrNotReady
}

// LoadError returns the error of the most recent load, or nil when it
// succeeded.
func (e *Engine) LoadError() error {
	if err := e.lastErr.Load(); err != nil {
		return err
	}
	return nil
}

// HealthChecker adapts Ready for /readyz and /healthz, as "policies".
func (e *Engine) HealthChecker() healthz.HealthChecker {
	return healthz.NamedCheck("policies", func(*http.Request) error { return e.Ready() })
}

// load reads the source and, if it changed since the last attempt (or
// force is set), compiles it and puts it into service.
func (e *Engine) load(ctx context.Context, force bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	logger := klog.FromContext(ctx).WithValues("source", e.source)

	snap, problems := readSnapshot(e.fsys, e.displayRoot)
	key := attemptKey(snap, problems)
	if !force && key == e.attempted {
		return nil
	}
	e.attempted = key
	if len(problems) == 0 && len(snap.files) == 0 {
		problems = []Problem{{File: e.displayRoot, Code: codeNodeguard, Message: "no policy files (*.rego other than *_test.rego)"}}
	}
	var set *preparedSet
	if len(problems) == 0 {
		set, problems = e.compile(ctx, snap)
	}
	if len(problems) > 0 {
		loadErr := &LoadError{Source: e.source, Hash: snap.hash, Problems: problems}
		e.lastErr.Store(loadErr)
		e.metrics.loadFailed()
		logger.Error(loadErr, "Policy set rejected; the last good set, if any, keeps serving",
			"hash", snap.hash, "activeHash", e.Hash(), "problems", len(problems))
		for _, p := range problems {
			logger.Error(nil, "Policy problem", "file", p.File, "line", p.Line, "column", p.Column,
				"code", p.Code, "message", p.Message)
		}
		return loadErr
	}
	e.active.Store(set)
	e.lastErr.Store(nil)
	e.metrics.loaded(e.source, set.hash)
	logger.Info("Policy set loaded", "hash", set.hash, "files", set.files,
		"admission", set.hasAdmission, "authorization", set.hasAuthz)
	return nil
}

// engineModule gives authz.allow its default, so that a set whose allow
// rules are all undefined for a request answers false rather than nothing.
// deny and warn need none: a set of messages is always defined, empty when
// no rule matches. The package name is reserved.
const (
	engineModuleFile = "<nodeguard engine>"
	engineModule     = `package nodeguard_engine

default authz_allow := false

authz_allow := data.nodeguard.authz.allow
`
)

// queryFor builds one query that reads every rule of a package the set
// defines, so that one evaluation answers both; "" when it defines none.
// Rules the set does not define are left out of the query (a reference to
// them would only cost time), and their binding is missing, which the
// result conversion reads as "nothing to say".
func queryFor(c *ast.Compiler, rules ...queryRule) string {
	var parts []string
	for _, r := range rules {
		if len(c.GetRulesWithPrefix(r.ref)) > 0 {
			parts = append(parts, r.binding+" := "+r.query)
		}
	}
	return strings.Join(parts, "; ")
}

type queryRule struct {
	binding string
	ref     ast.Ref
	query   string
}

var (
	admissionRules = []queryRule{
		{"deny", admissionDenyRef, admissionDenyRef.String()},
		{"warn", admissionWarnRef, admissionWarnRef.String()},
	}
	authzRules = []queryRule{
		{"deny", authzDenyRef, authzDenyRef.String()},
		{"allow", authzAllowRef, "data.nodeguard_engine.authz_allow"},
	}
)

// compile parses, checks, compiles and prepares a snapshot.
func (e *Engine) compile(ctx context.Context, snap snapshot) (*preparedSet, []Problem) {
	modules, problems := parseFiles(snap.files)
	problems = append(problems, checkReachableKinds(modules)...)
	if len(problems) > 0 {
		return nil, problems
	}
	engineMod, err := ast.ParseModuleWithOpts(engineModuleFile, engineModule, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, problemsFrom(err, engineModuleFile)
	}
	files := len(modules)
	modules[engineModuleFile] = engineMod

	txn, err := e.store.NewTransaction(ctx)
	if err != nil {
		return nil, []Problem{{File: e.displayRoot, Message: fmt.Sprintf("reading data: %v", err)}}
	}
	defer e.store.Abort(ctx, txn)
	compiler := ast.NewCompiler().
		WithCapabilities(e.caps).
		WithDefaultRegoVersion(ast.RegoV1).
		WithUseTypeCheckAnnotations(true).
		WithPathConflictsCheck(storage.NonEmpty(ctx, e.store, txn))
	if compiler.Compile(modules); compiler.Failed() {
		return nil, problemsFrom(compiler.Errors, e.displayRoot)
	}
	if problems := checkShapes(compiler); len(problems) > 0 {
		return nil, problems
	}
	if problems := e.checkConfigNamespaces(ctx, compiler, txn); len(problems) > 0 {
		return nil, problems
	}

	set := &preparedSet{hash: snap.hash, files: files}
	for _, q := range []struct {
		query string
		into  *rego.PreparedEvalQuery
		has   *bool
	}{
		{queryFor(compiler, admissionRules...), &set.admission, &set.hasAdmission},
		{queryFor(compiler, authzRules...), &set.authz, &set.hasAuthz},
	} {
		if q.query == "" {
			continue
		}
		opts := append([]func(*rego.Rego){
			rego.Compiler(compiler),
			rego.Store(e.store),
			rego.Query(q.query),
			rego.SetRegoVersion(ast.RegoV1),
		}, builtinOptions(e.graph)...)
		prepared, err := rego.New(opts...).PrepareForEval(ctx)
		if err != nil {
			return nil, problemsFrom(err, e.displayRoot)
		}
		*q.into, *q.has = prepared, true
	}
	return set, nil
}
