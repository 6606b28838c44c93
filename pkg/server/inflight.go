package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// InFlightLimit bounds the review requests one endpoint serves at once.
//
// A request beyond MaxInFlight waits for a slot, without its body being
// read, so that a burst costs a goroutine and the connection's buffers per
// waiting request rather than a decoded review. It waits at most MaxWait,
// and never more than half of the ?timeout= the apiserver appended, so that
// both the review and a shed answer still arrive in time. A request that
// finds MaxQueued others already waiting, or whose wait runs out, is shed:
// answered by Shed without being decided.
type InFlightLimit struct {
	// MaxInFlight is how many requests are decided at once; at least 1.
	MaxInFlight int
	// MaxQueued is how many more may wait for a slot; 0 sheds at once.
	MaxQueued int
	// MaxWait caps the wait for a slot; 0 sheds at once.
	MaxWait time.Duration
	// Shed answers the requests that are not decided.
	Shed ShedFunc
}

// Validate reports what makes the limit unusable.
func (l InFlightLimit) Validate() error {
	var errs []error
	if l.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("max in flight %d: must be at least 1", l.MaxInFlight))
	}
	if l.MaxQueued < 0 {
		errs = append(errs, fmt.Errorf("max queued %d: must not be negative", l.MaxQueued))
	}
	if l.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("max wait %v: must not be negative", l.MaxWait))
	}
	if l.Shed == nil {
		errs = append(errs, errors.New("a shed answer is required"))
	}
	return errors.Join(errs...)
}

// Why a request was shed: the label values of the shed counter.
const (
	shedQueueFull = "queue_full"
	shedTimedOut  = "wait_timeout"
	shedCanceled  = "canceled"
)

// shedDiscardLimit is the most of a shed request's body read to keep its
// connection usable; it is above every body cap cmd/webhook allows, and a
// larger body costs the connection instead.
const shedDiscardLimit = 8 << 20

// shedDiscardTimeout bounds reading a shed request's body when it carries no
// ?timeout=, so that a client sending slowly cannot hold a shed request
// open; with one, the client's own timeout bounds it, since cutting a body
// short makes the client see a broken connection instead of the answer.
const shedDiscardTimeout = 5 * time.Second

// LimitInFlight wraps an endpoint's handler in limit, counting under
// endpoint what it sheds. Mount the result with HandleReview, so that a
// client without a valid certificate is refused before it takes a slot.
func (s *Server) LimitInFlight(endpoint string, limit InFlightLimit, next http.Handler) (http.Handler, error) {
	if err := limit.Validate(); err != nil {
		return nil, fmt.Errorf("in-flight limit of %s: %w", endpoint, err)
	}
	g := &inFlightGate{
		limit:   limit,
		next:    next,
		slots:   make(chan struct{}, limit.MaxInFlight),
		waiting: s.metrics.waiting.WithLabelValues(endpoint),
		shed:    make(map[string]prometheus.Counter, 3),
	}
	for _, reason := range []string{shedQueueFull, shedTimedOut, shedCanceled} {
		g.shed[reason] = s.metrics.shed.WithLabelValues(endpoint, reason)
	}
	return g, nil
}

type inFlightGate struct {
	limit InFlightLimit
	next  http.Handler
	// slots holds a token per request being decided.
	slots   chan struct{}
	queued  atomic.Int64
	waiting prometheus.Gauge
	shed    map[string]prometheus.Counter
}

func (g *inFlightGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case g.slots <- struct{}{}:
		g.serve(w, r)
		return
	default:
	}
	if g.queued.Add(1) > int64(g.limit.MaxQueued) {
		g.queued.Add(-1)
		g.shedRequest(w, r, shedQueueFull)
		return
	}
	g.waiting.Inc()
	reason := g.wait(r)
	g.queued.Add(-1)
	g.waiting.Dec()
	if reason != "" {
		g.shedRequest(w, r, reason)
		return
	}
	g.serve(w, r)
}

// wait blocks until a slot is taken (""), or returns why not.
func (g *inFlightGate) wait(r *http.Request) string {
	timer := time.NewTimer(waitBudget(r, g.limit.MaxWait))
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return ""
	case <-timer.C:
		return shedTimedOut
	case <-r.Context().Done():
		return shedCanceled
	}
}

func (g *inFlightGate) serve(w http.ResponseWriter, r *http.Request) {
	defer func() { <-g.slots }()
	g.next.ServeHTTP(w, r)
}

// waitBudget is how long r may wait for a slot: half its ?timeout= (the
// other half is for deciding or shedding it), capped by maxWait. A timeout
// that does not parse is left for the review handler to refuse.
func waitBudget(r *http.Request, maxWait time.Duration) time.Duration {
	return min(maxWait, requestTimeout(r, 2*maxWait)/2)
}

// requestTimeout is r's ?timeout=, or otherwise when it is absent or does
// not parse; never more than the apiserver's longest webhook timeout.
func requestTimeout(r *http.Request, otherwise time.Duration) time.Duration {
	if t := r.URL.Query().Get("timeout"); t != "" {
		if d, err := time.ParseDuration(t); err == nil && d > 0 {
			return min(d, maxWebhookTimeout)
		}
	}
	return otherwise
}

// maxWebhookTimeout is the longest timeout the apiserver gives a webhook.
const maxWebhookTimeout = 30 * time.Second

// shedRequest answers r without deciding it: a well-formed review from
// Shed when it can make one, HTTP 429 with Retry-After otherwise.
func (g *inFlightGate) shedRequest(w http.ResponseWriter, r *http.Request, reason string) {
	g.shed[reason].Inc()
	message := shedMessage(reason, g.limit.MaxInFlight)
	// Only the head of the body is offered to Shed: the few fields an
	// answer echoes come first, and reading more would buffer the very
	// load being shed.
	response, ok := g.limit.Shed(io.LimitReader(r.Body, ShedPeekBytes), message)
	discardBody(w, r, requestTimeout(r, shedDiscardTimeout))
	klog.FromContext(r.Context()).V(4).Info("Shed a review request", "path", r.URL.Path, "reason", reason)
	if !ok {
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusTooManyRequests, "%s", message)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(response)
}

func shedMessage(reason string, maxInFlight int) string {
	switch reason {
	case shedQueueFull:
		return fmt.Sprintf("nodeguard webhook overloaded: %d reviews in flight and the queue is full; request shed, retry later", maxInFlight)
	case shedTimedOut:
		return fmt.Sprintf("nodeguard webhook overloaded: no free slot among %d in time; request shed, retry later", maxInFlight)
	default:
		return "nodeguard webhook overloaded: request canceled while waiting for a free slot"
	}
}

// discardBody reads what is left of a shed request's body, bounded in size
// and time, into no buffer: an HTTP/1.1 connection whose body was not read
// is closed, and a client still sending would see a reset instead of the
// answer.
func discardBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	// Not every ResponseWriter supports deadlines (tests' recorders); the
	// size bound still holds there.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	_, _ = io.CopyN(io.Discard, r.Body, shedDiscardLimit)
}
