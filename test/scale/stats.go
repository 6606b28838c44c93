package scale

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Operations a simulated kubelet measures.
const (
	OpLease      = "lease-renewal"
	OpStatus     = "status-patch"
	OpNodeWatch  = "node-watch"
	OpConfigGet  = "config-get"
	OpConfigWait = "config-watch"
)

// maxErrorSamples bounds how many error messages an operation keeps, so
// that an outage of thousands of failures does not fill memory.
const maxErrorSamples = 5

// recorder collects the outcome of operations started inside the window.
// Outside it (warm-up, shutdown) it drops them, so a report covers exactly
// the steady window.
type recorder struct {
	// windowStart and windowEnd are UnixNano; 0 means not started / open.
	windowStart atomic.Int64
	windowEnd   atomic.Int64

	mu  sync.Mutex
	ops map[string]*opRecord
}

type opRecord struct {
	latencies []time.Duration
	errors    int
	samples   []string
}

func newRecorder() *recorder { return &recorder{ops: map[string]*opRecord{}} }

// open starts the window now; close ends it.
func (r *recorder) open(now time.Time) {
	r.mu.Lock()
	r.ops = map[string]*opRecord{}
	r.mu.Unlock()
	r.windowEnd.Store(0)
	r.windowStart.Store(now.UnixNano())
}

func (r *recorder) close(now time.Time) { r.windowEnd.Store(now.UnixNano()) }

func (r *recorder) inWindow(start time.Time) bool {
	s := r.windowStart.Load()
	if s == 0 || start.UnixNano() < s {
		return false
	}
	e := r.windowEnd.Load()
	return e == 0 || start.UnixNano() < e
}

// observe records one operation that started at start and took took; err
// nil means it succeeded. Failed operations count as errors only, so that
// an instant refusal does not make the latency look good.
func (r *recorder) observe(op string, start time.Time, took time.Duration, err error) {
	if !r.inWindow(start) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.ops[op]
	if rec == nil {
		rec = &opRecord{}
		r.ops[op] = rec
	}
	if err != nil {
		rec.errors++
		if len(rec.samples) < maxErrorSamples {
			rec.samples = append(rec.samples, err.Error())
		}
		return
	}
	rec.latencies = append(rec.latencies, took)
}

// OpStats summarises one operation over the window.
type OpStats struct {
	OK     int `json:"ok"`
	Errors int `json:"errors"`
	// Latencies of the successful ones, in milliseconds.
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// ErrorSamples are the first few error messages.
	ErrorSamples []string `json:"error_samples,omitempty"`
}

func (r *recorder) stats() map[string]OpStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]OpStats{}
	for op, rec := range r.ops {
		st := latencyStats(slices.Clone(rec.latencies))
		st.Errors, st.ErrorSamples = rec.errors, slices.Clone(rec.samples)
		out[op] = st
	}
	return out
}

// latencyStats sorts lat in place and gives its quantiles.
func latencyStats(lat []time.Duration) OpStats {
	slices.Sort(lat)
	return OpStats{
		OK:    len(lat),
		P50Ms: ms(quantile(lat, 0.50)), P90Ms: ms(quantile(lat, 0.90)),
		P99Ms: ms(quantile(lat, 0.99)), MaxMs: ms(quantile(lat, 1)),
	}
}

// quantile is the nearest-rank quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
