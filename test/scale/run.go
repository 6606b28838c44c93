package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// Mode says how nodeguard is installed while a window is measured.
type Mode string

const (
	// ModeNone leaves nodeguard out of both chains.
	ModeNone Mode = "none"
	// ModeShipped installs it as manifests/ say.
	ModeShipped Mode = "shipped"
	// ModeMinVersion installs it as shipped but for the opt-in
	// authorization configuration that enforces the minimum kubelet
	// version on every request of a node.
	ModeMinVersion Mode = "min-version"
	// ModeWebhookDown installs it as shipped, then kills the webhook for
	// the whole window, then checks the writes nodeguard judges (Outage).
	ModeWebhookDown Mode = "webhook-down"
)

// ParseModes parses a comma-separated list of modes.
func ParseModes(list string) ([]Mode, error) {
	var modes []Mode
	for _, m := range strings.Split(list, ",") {
		switch mode := Mode(strings.TrimSpace(m)); mode {
		case ModeNone, ModeShipped, ModeMinVersion, ModeWebhookDown:
			modes = append(modes, mode)
		default:
			return nil, fmt.Errorf("unknown mode %q: want none, shipped, min-version or webhook-down", m)
		}
	}
	return modes, nil
}

// Options shape a run. Zero durations are errors, not defaults: the
// command's flags carry the defaults.
type Options struct {
	// Modes are measured in this order, each on a control plane of its own
	// unless ReuseCluster.
	Modes []Mode
	// Nodes is the number of simulated kubelets.
	Nodes int
	// Period is each kubelet's lease renewal interval, and its status
	// patch interval unless StatusPeriod is set.
	Period time.Duration
	// StatusPeriod, when positive, is each kubelet's status patch interval
	// instead of Period. A real kubelet patches its status when it changed
	// or every nodeStatusReportFrequency (5m by default); a patch every
	// Period is the worst case of a status that keeps changing.
	StatusPeriod time.Duration
	// Warmup runs the load before the window, at least one Period, so that
	// every timer has fired and the apiserver's caches are warm.
	Warmup time.Duration
	// Window is the measured time.
	Window time.Duration
	// DownSettle is the time between killing the webhook and the window.
	DownSettle time.Duration
	// ConfigFraction of the nodes are assigned a kubelet configuration.
	ConfigFraction float64
	// ReuseCluster measures webhook-down right after shipped on the same
	// cluster and fleet (the webhook killed after the shipped window),
	// saving a start-up; other modes still get their own.
	ReuseCluster bool
	// WorkDir holds each cluster's certificates and logs.
	WorkDir string
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// statusPeriod is the kubelets' status patch interval.
func (o Options) statusPeriod() time.Duration {
	if o.StatusPeriod > 0 {
		return o.StatusPeriod
	}
	return o.Period
}

func (o Options) validate() error {
	var errs []error
	if len(o.Modes) == 0 {
		errs = append(errs, errors.New("no mode to run"))
	}
	if o.Nodes < 1 {
		errs = append(errs, fmt.Errorf("nodes must be at least 1, not %d", o.Nodes))
	}
	if o.Period <= 0 || o.Window <= 0 {
		errs = append(errs, errors.New("period and window must be positive"))
	}
	if longest := max(o.Period, o.statusPeriod()); o.Warmup < longest {
		errs = append(errs, fmt.Errorf("warm-up %s is shorter than the period %s: not every timer would have fired", o.Warmup, longest))
	}
	if o.StatusPeriod < 0 {
		errs = append(errs, errors.New("status period may not be negative"))
	}
	if o.DownSettle < 0 {
		errs = append(errs, errors.New("down-settle may not be negative"))
	}
	if o.ConfigFraction < 0 || o.ConfigFraction > 1 {
		errs = append(errs, fmt.Errorf("config fraction %v is not between 0 and 1", o.ConfigFraction))
	}
	if o.WorkDir == "" {
		errs = append(errs, errors.New("a work directory is required"))
	}
	return errors.Join(errs...)
}

// Result is one mode's window.
type Result struct {
	Mode          Mode      `json:"mode"`
	Nodes         int       `json:"nodes"`
	ConfigReaders int       `json:"config_readers"`
	Start         time.Time `json:"window_start"`
	WindowSeconds float64   `json:"window_seconds"`
	// Ops are the simulated kubelets' operations started in the window.
	Ops map[string]OpStats `json:"ops"`
	// WebhookCallsPerSec is nodeguard_http_requests_total's rate by
	// endpoint (/authorize, /validate), from the webhook itself; nil when it
	// does not run.
	WebhookCallsPerSec map[string]float64 `json:"webhook_calls_per_sec,omitempty"`
	// APIServerCallsPerSec is what the apiserver counts of its calls to
	// nodeguard: "authorize <result>" from
	// apiserver_authorization_webhook_evaluations_total and "validate
	// <code>" from apiserver_admission_webhook_request_total (code 0 or
	// 500 when the webhook could not be reached).
	APIServerCallsPerSec map[string]float64 `json:"apiserver_calls_per_sec,omitempty"`
	// Processes are webhook, kube-apiserver, etcd and harness.
	Processes map[string]ProcStats `json:"processes"`
	// Manifests are those the mode's cluster was started with.
	Manifests Fingerprint `json:"manifests"`
	// Outage is set in mode webhook-down.
	Outage *Outage `json:"outage,omitempty"`
}

// session is one cluster and fleet, measured in one or more phases.
type session struct{ phases []Mode }

func plan(o Options) []session {
	var sessions []session
	for _, m := range o.Modes {
		if n := len(sessions); o.ReuseCluster && m == ModeWebhookDown && n > 0 {
			last := &sessions[n-1]
			if last.phases[len(last.phases)-1] == ModeShipped {
				last.phases = append(last.phases, m)
				continue
			}
		}
		sessions = append(sessions, session{phases: []Mode{m}})
	}
	return sessions
}

// Run measures every mode of o and returns their results in order. It
// stops everything it started before it returns, also when ctx is
// cancelled or a step fails.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("scale options: %w", err)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	var results []Result
	for i, s := range plan(o) {
		dir := filepath.Join(o.WorkDir, fmt.Sprintf("%d-%s", i, s.phases[0]))
		r, err := runSession(ctx, o, s, dir)
		results = append(results, r...)
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

func runSession(ctx context.Context, o Options, s session, dir string) (results []Result, err error) {
	withNodeguard := s.phases[0] != ModeNone
	logf(o.Progress, "%s: starting a control plane (nodeguard installed: %t) in %s", s.phases[0], withNodeguard, dir)
	manifests, err := fingerprint(s.phases[0])
	if err != nil {
		return nil, err
	}
	c, err := startCluster(ctx, dir, s.phases[0])
	if err != nil {
		return nil, err
	}
	defer c.stop()
	rec := newRecorder()
	f, err := startFleet(ctx, c, o, rec)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	logf(o.Progress, "%s: %d kubelets registered (%d read a config); warming up for %s", s.phases[0], o.Nodes, f.readers, o.Warmup)
	if err := sleep(ctx, o.Warmup); err != nil {
		return nil, err
	}
	for _, phase := range s.phases {
		if phase == ModeWebhookDown {
			logf(o.Progress, "%s: killing the webhook, then %s before the window", phase, o.DownSettle)
			c.env.StopWebhook()
			if err := sleep(ctx, o.DownSettle); err != nil {
				return results, err
			}
		}
		logf(o.Progress, "%s: measuring for %s", phase, o.Window)
		r, err := measure(ctx, c, rec, o, phase, phase != ModeNone && phase != ModeWebhookDown)
		if err != nil {
			return results, fmt.Errorf("mode %s: %w", phase, err)
		}
		r.ConfigReaders = f.readers
		r.Manifests = manifests
		if phase == ModeWebhookDown {
			logf(o.Progress, "%s: trying an assignment and a ConfigMap edit, then starting the webhook again", phase)
			r.Outage = checkOutage(ctx, c, f)
		}
		results = append(results, r)
	}
	return results, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}
