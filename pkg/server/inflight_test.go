package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// blockingHandler answers "decided" once release is closed, counting the
// requests inside it.
type blockingHandler struct {
	release chan struct{}
	mu      sync.Mutex
	inside  int
}

func (h *blockingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.inside++
	h.mu.Unlock()
	<-h.release
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "decided")
}

func (h *blockingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inside
}

func newTestGate(t *testing.T, limit InFlightLimit, next http.Handler) (http.Handler, *httpMetrics) {
	t.Helper()
	m, err := newHTTPMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h, err := (&Server{metrics: m}).LimitInFlight("/test", limit, next)
	if err != nil {
		t.Fatal(err)
	}
	return h, m
}

type answer struct {
	code   int
	header http.Header
	body   string
}

// serveAsync serves a POST of body to target in the background.
func serveAsync(ctx context.Context, h http.Handler, target, body string) <-chan answer {
	done := make(chan answer, 1)
	go func() {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		done <- answer{rec.Code, rec.Header(), rec.Body.String()}
	}()
	return done
}

func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestInFlightLimitQueuesThenShedsWhenFull(t *testing.T) {
	next := &blockingHandler{release: make(chan struct{})}
	h, m := newTestGate(t, InFlightLimit{MaxInFlight: 2, MaxQueued: 3, MaxWait: time.Hour, Shed: ShedSubjectAccessReview}, next)
	ctx := context.Background()
	var decided []<-chan answer
	for range 2 {
		decided = append(decided, serveAsync(ctx, h, "/test", `{}`))
	}
	pollUntil(t, "two requests in flight", func() bool { return next.count() == 2 })
	for range 3 {
		decided = append(decided, serveAsync(ctx, h, "/test", `{}`))
	}
	waiting := m.waiting.WithLabelValues("/test")
	pollUntil(t, "three requests waiting", func() bool { return testutil.ToFloat64(waiting) == 3 })

	// The queue is full: these are shed at once, with a well-formed
	// SubjectAccessReview that has no opinion.
	for range 4 {
		got := <-serveAsync(ctx, h, "/test", `{}`)
		var sar authorizationv1.SubjectAccessReview
		if err := json.Unmarshal([]byte(got.body), &sar); err != nil || got.code != http.StatusOK {
			t.Fatalf("shed answer = %d %q (%v), want a SubjectAccessReview", got.code, got.body, err)
		}
		if sar.Kind != "SubjectAccessReview" || sar.APIVersion != "authorization.k8s.io/v1" || sar.Status.Allowed || sar.Status.Denied ||
			!strings.Contains(sar.Status.EvaluationError, "overloaded") {
			t.Fatalf("shed answer = %+v, want no opinion with an overload evaluation error", sar)
		}
	}
	if got := testutil.ToFloat64(m.shed.WithLabelValues("/test", shedQueueFull)); got != 4 {
		t.Fatalf("queue_full sheds = %v, want 4", got)
	}
	if next.count() != 2 {
		t.Fatalf("%d requests reached the handler while it was full, want 2", next.count())
	}

	// Once the handler frees its slots, every waiting request is decided.
	close(next.release)
	for i, ch := range decided {
		if got := <-ch; got.code != http.StatusOK || got.body != "decided" {
			t.Fatalf("request %d = %d %q, want it decided", i, got.code, got.body)
		}
	}
	if got := <-serveAsync(ctx, h, "/test", `{}`); got.body != "decided" {
		t.Fatalf("after the burst: %q, want decided", got.body)
	}
	if testutil.ToFloat64(waiting) != 0 {
		t.Fatalf("waiting gauge = %v after the burst", testutil.ToFloat64(waiting))
	}
}

func TestInFlightLimitShedsWhenTheWaitRunsOut(t *testing.T) {
	for _, tt := range []struct {
		name    string
		maxWait time.Duration
		target  string
	}{
		{"half the apiserver's timeout", time.Hour, "/test?timeout=100ms"},
		{"the configured cap", 50 * time.Millisecond, "/test?timeout=1h"},
		{"no timeout given", 50 * time.Millisecond, "/test"},
		{"no wait at all", 0, "/test?timeout=10s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next := &blockingHandler{release: make(chan struct{})}
			defer close(next.release)
			h, m := newTestGate(t, InFlightLimit{MaxInFlight: 1, MaxQueued: 10, MaxWait: tt.maxWait, Shed: ShedAdmissionReview}, next)
			_ = serveAsync(context.Background(), h, "/test", `{}`)
			pollUntil(t, "one request in flight", func() bool { return next.count() == 1 })
			got := <-serveAsync(context.Background(), h, tt.target, `{"kind":"AdmissionReview","request":{"uid":"u-1"}}`)
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal([]byte(got.body), &review); err != nil || review.Response == nil {
				t.Fatalf("shed answer = %d %q (%v)", got.code, got.body, err)
			}
			if r := review.Response; r.UID != "u-1" || r.Allowed || r.Result == nil || r.Result.Code != http.StatusTooManyRequests {
				t.Fatalf("shed answer = %+v, want uid u-1, refused with 429", r)
			}
			if got := testutil.ToFloat64(m.shed.WithLabelValues("/test", shedTimedOut)); got != 1 {
				t.Fatalf("wait_timeout sheds = %v, want 1", got)
			}
		})
	}
}

func TestInFlightLimitShedsCanceledWaiters(t *testing.T) {
	next := &blockingHandler{release: make(chan struct{})}
	defer close(next.release)
	h, m := newTestGate(t, InFlightLimit{MaxInFlight: 1, MaxQueued: 1, MaxWait: time.Hour, Shed: ShedAdmissionReview}, next)
	_ = serveAsync(context.Background(), h, "/test", `{}`)
	pollUntil(t, "one request in flight", func() bool { return next.count() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	waiter := serveAsync(ctx, h, "/test", `not JSON`)
	pollUntil(t, "one waiting", func() bool { return testutil.ToFloat64(m.waiting.WithLabelValues("/test")) == 1 })
	cancel()
	got := <-waiter
	// No UID to echo: HTTP 429, which the apiserver retries.
	if got.code != http.StatusTooManyRequests || got.header.Get("Retry-After") == "" || !strings.Contains(got.body, "overloaded") {
		t.Fatalf("canceled waiter = %d %v %q, want 429 with Retry-After", got.code, got.header, got.body)
	}
	if got := testutil.ToFloat64(m.shed.WithLabelValues("/test", shedCanceled)); got != 1 {
		t.Fatalf("canceled sheds = %v, want 1", got)
	}
}

func TestInFlightLimitValidate(t *testing.T) {
	shed := ShedSubjectAccessReview
	for _, tt := range []struct {
		name    string
		limit   InFlightLimit
		wantErr string
	}{
		{"valid", InFlightLimit{MaxInFlight: 1, Shed: shed}, ""},
		{"zero in flight", InFlightLimit{MaxInFlight: 0, Shed: shed}, "max in flight 0"},
		{"negative queue", InFlightLimit{MaxInFlight: 1, MaxQueued: -1, Shed: shed}, "max queued -1"},
		{"negative wait", InFlightLimit{MaxInFlight: 1, MaxWait: -time.Second, Shed: shed}, "max wait -1s"},
		{"no shed answer", InFlightLimit{MaxInFlight: 1}, "shed answer is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.limit.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestWaitBudget(t *testing.T) {
	for _, tt := range []struct {
		target string
		want   time.Duration
	}{
		{"/r", time.Second},
		{"/r?timeout=10s", time.Second},
		{"/r?timeout=1s", 500 * time.Millisecond},
		{"/r?timeout=soon", time.Second},
		{"/r?timeout=-1s", time.Second},
	} {
		if got := waitBudget(httptest.NewRequest(http.MethodPost, tt.target, nil), time.Second); got != tt.want {
			t.Errorf("waitBudget(%s) = %v, want %v", tt.target, got, tt.want)
		}
	}
}
