package settings

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// Watcher holds the settings from a file and reloads it when the file's
// content changes. Reading the path anew each time follows the symlink
// swaps of ConfigMap and Secret volumes.
type Watcher struct {
	path     string
	interval time.Duration
	metrics  *watcherMetrics

	mu        sync.RWMutex
	current   *Settings
	content   []byte
	lastError error
	listeners []func(*Settings)
}

// NewWatcher loads path, failing if the first load fails: a webhook must
// not start with settings other than the ones asked for. An empty path
// gives a Watcher that always holds fallback (Default() when nil). reg may
// be nil.
func NewWatcher(path string, fallback *Settings, interval time.Duration, reg prometheus.Registerer) (*Watcher, error) {
	if fallback == nil {
		fallback = Default()
	}
	w := &Watcher{path: path, interval: interval, current: fallback}
	if reg != nil {
		m, err := newWatcherMetrics(reg)
		if err != nil {
			return nil, err
		}
		w.metrics = m
	}
	if path == "" {
		w.metrics.loaded(true)
		return w, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading settings file: %w", err)
	}
	s, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	w.current, w.content = s, data
	w.metrics.loaded(true)
	return w, nil
}

// Current returns the settings in force.
func (w *Watcher) Current() *Settings {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.current
}

// OnChange registers f to be called with each newly loaded settings, and
// once now with the current ones.
func (w *Watcher) OnChange(f func(*Settings)) {
	w.mu.Lock()
	w.listeners = append(w.listeners, f)
	current := w.current
	w.mu.Unlock()
	f(current)
}

// Degraded describes a failed reload while the last good settings stay in
// force; empty when all is well.
func (w *Watcher) Degraded() string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.lastError == nil {
		return ""
	}
	return fmt.Sprintf("last reload failed, still enforcing the settings loaded before: %v", w.lastError)
}

// Name names the watcher in health output.
func (w *Watcher) Name() string { return "settings-file" }

// Run polls the file until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	if w.path == "" {
		return
	}
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			w.Reload(ctx)
		}
	}
}

// Reload reads the file once; a change that parses replaces the settings,
// one that does not is reported and ignored.
func (w *Watcher) Reload(ctx context.Context) {
	logger := klog.FromContext(ctx)
	data, err := os.ReadFile(w.path)
	if err == nil {
		w.mu.RLock()
		unchanged := bytes.Equal(data, w.content) && w.lastError == nil
		w.mu.RUnlock()
		if unchanged {
			return
		}
	}
	var s *Settings
	if err == nil {
		s, err = Parse(data, w.path)
	}
	w.mu.Lock()
	if err != nil {
		changed := w.lastError == nil || w.lastError.Error() != err.Error()
		w.lastError = err
		w.mu.Unlock()
		w.metrics.loaded(false)
		if changed {
			logger.Error(err, "Settings reload failed; keeping the last good settings", "path", w.path)
		}
		return
	}
	w.current, w.content, w.lastError = s, data, nil
	listeners := append([]func(*Settings){}, w.listeners...)
	w.mu.Unlock()
	w.metrics.loaded(true)
	logger.Info("Settings reloaded", "path", w.path)
	for _, f := range listeners {
		f(s)
	}
}

type watcherMetrics struct {
	lastLoadSuccess prometheus.Gauge
	loads           *prometheus.CounterVec
}

func newWatcherMetrics(reg prometheus.Registerer) (*watcherMetrics, error) {
	m := &watcherMetrics{
		lastLoadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			// The metric names predate the word settings; alerts use them.
			Namespace: "nodeguard", Subsystem: "policy_file", Name: "last_load_success",
			Help: "1 if the last load of the settings file (--settings) succeeded; 0 if it failed and the previous settings are still enforced.",
		}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodeguard", Subsystem: "policy_file", Name: "loads_total",
			Help: "Loads of the settings file (--settings) by result (success, error).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.lastLoadSuccess, m.loads} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering settings file metrics: %w", err)
		}
	}
	return m, nil
}

func (m *watcherMetrics) loaded(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.lastLoadSuccess.Set(1)
		m.loads.WithLabelValues("success").Inc()
		return
	}
	m.lastLoadSuccess.Set(0)
	m.loads.WithLabelValues("error").Inc()
}
