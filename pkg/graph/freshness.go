package graph

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Freshness tells whether the graph still follows the apiserver. Informers
// keep serving their last state when their watches are cut: a revocation
// made during the cut never reaches the graph, so a graph that has lost its
// feed for long would keep allowing reads it should refuse. Freshness sees
// every list and watch the informers make (see monitor) and marks the graph
// stale once any informer has gone without a working list or watch for
// longer than the bound; the authorizer then answers no opinion where it
// would have needed the graph to allow. A successful relist, or a watch
// resumed where it stopped, makes the graph fresh again.
//
// The reflector's own watch-error handler is not enough for this: a watch
// that fails with "connection refused" is retried inside the reflector
// without ever calling it, so a cut apiserver could go unnoticed forever.
type Freshness struct {
	graph      *Graph
	staleAfter time.Duration
	clock      clock.WithDelayedExecution
	logger     klog.Logger

	mu      sync.Mutex
	sources []*source
	timer   clock.Timer
	nextID  uint64
}

// source is one informer's connection to the apiserver.
type source struct {
	name      string
	connected bool
	// since is when connected last changed (or the source was created).
	since time.Time
	// watch names the watch whose end means the connection is lost; ends of
	// earlier watches, which the reflector stopped itself and replaced, are
	// old news. Zero while no watch is current.
	watch   uint64
	lastErr string
}

// NewFreshness tracks the informers that feed g, marking g stale after
// staleAfter (which must be positive) without a working list or watch.
// clk may be nil for the real clock.
func NewFreshness(g *Graph, staleAfter time.Duration, clk clock.WithDelayedExecution) (*Freshness, error) {
	if staleAfter <= 0 {
		return nil, fmt.Errorf("graph staleness bound %v: must be positive", staleAfter)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Freshness{graph: g, staleAfter: staleAfter, clock: clk, logger: klog.Background().WithName("graph-freshness")}, nil
}

// addSource registers an informer. It starts disconnected: until its first
// list it has nothing to offer.
func (f *Freshness) addSource(name string) *source {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &source{name: name, since: f.clock.Now(), lastErr: "not listed yet"}
	f.sources = append(f.sources, s)
	f.graph.metrics.setConnected(name, false)
	f.evaluateLocked()
	return s
}

// listed records a successful list: the informer's store now matches the
// apiserver, and any watch before it no longer matters.
func (f *Freshness) listed(s *source) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.watch = 0
	f.setConnectedLocked(s, true, "")
}

// watchOpened records a watch the apiserver accepted and returns its id.
// A watch that first streams the initial state (sendInitialEvents) counts
// as connected only once that state is complete (initialEventsDone).
func (f *Freshness) watchOpened(s *source, streamsInitialState bool) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	s.watch = f.nextID
	if !streamsInitialState {
		f.setConnectedLocked(s, true, "")
	}
	return s.watch
}

// initialEventsDone records that a watch has streamed the whole initial
// state.
func (f *Freshness) initialEventsDone(s *source, id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.watch == id {
		f.setConnectedLocked(s, true, "")
	}
}

// watchEnded records that a watch stopped delivering events, for err.
func (f *Freshness) watchEnded(s *source, id uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.watch != id {
		return
	}
	s.watch = 0
	f.setConnectedLocked(s, false, err.Error())
}

// failed records a list or watch call the apiserver did not answer.
func (f *Freshness) failed(s *source, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.watch = 0
	f.setConnectedLocked(s, false, err.Error())
}

func (f *Freshness) setConnectedLocked(s *source, connected bool, lastErr string) {
	if !connected {
		s.lastErr = lastErr
	}
	if s.connected == connected {
		return
	}
	s.connected, s.since = connected, f.clock.Now()
	f.graph.metrics.setConnected(s.name, connected)
	if connected {
		f.logger.V(2).Info("Informer connected", "informer", s.name)
	} else {
		f.logger.V(2).Info("Informer lost its connection", "informer", s.name, "err", lastErr)
	}
	f.evaluateLocked()
}

// evaluateLocked marks the graph stale when a source has been disconnected
// for staleAfter or longer, fresh when none has, and sets a timer for the
// next source that would cross the bound.
func (f *Freshness) evaluateLocked() {
	now := f.clock.Now()
	stale := false
	var next time.Duration
	for _, s := range f.sources {
		if s.connected {
			continue
		}
		left := f.staleAfter - now.Sub(s.since)
		if left <= 0 {
			stale = true
			continue
		}
		if next == 0 || left < next {
			next = left
		}
	}
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if next > 0 {
		// In a goroutine of its own: a fake clock runs the function while
		// holding its lock, and evaluating reads the clock.
		f.timer = f.clock.AfterFunc(next, func() { go f.reevaluate() })
	}
	if f.graph.stale.Load() == stale {
		return
	}
	f.graph.stale.Store(stale)
	f.graph.metrics.setStale(stale)
	if stale {
		f.logger.Info("Graph is stale: an informer has had no working list or watch for longer than the bound; ConfigMap reads get no opinion until it recovers",
			"staleAfter", f.staleAfter, "informers", f.describeLocked(now))
	} else {
		f.logger.Info("Graph is fresh again")
	}
}

func (f *Freshness) reevaluate() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evaluateLocked()
}

// Check is a readiness check: it fails while the graph is stale, saying
// which informers are cut, since when, and why. A nil Freshness (no bound)
// always passes.
func (f *Freshness) Check() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.graph.stale.Load() {
		return nil
	}
	return fmt.Errorf("graph is stale (no working list or watch for longer than %v): %s", f.staleAfter, f.describeLocked(f.clock.Now()))
}

// Name names the readiness check and its detail line.
func (f *Freshness) Name() string { return "graph-fresh" }

// Degraded is Check's detail for /readyz?verbose, which shows a failed
// check's name but withholds its error: "" while fresh.
func (f *Freshness) Degraded() string {
	if err := f.Check(); err != nil {
		return err.Error()
	}
	return ""
}

// describeLocked lists the disconnected sources, sorted by name.
func (f *Freshness) describeLocked(now time.Time) string {
	var parts []string
	for _, s := range f.sources {
		if !s.connected {
			parts = append(parts, fmt.Sprintf("%s disconnected for %v: %s", s.name, now.Sub(s.since).Round(time.Second), s.lastErr))
		}
	}
	if len(parts) == 0 {
		return "all informers connected"
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// errWatchClosed is why a watch whose stream ended counts as disconnected.
var errWatchClosed = errors.New("watch stream ended")
