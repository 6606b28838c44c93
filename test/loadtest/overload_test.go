package loadtest

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/server"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// The limits of the overload runs: far below cmd/webhook's defaults, so
// that a burst a test can afford on two shared cores is far above them.
var (
	overloadAuthorize = server.InFlightLimit{MaxInFlight: 4, MaxQueued: 16, MaxWait: 250 * time.Millisecond, Shed: server.ShedSubjectAccessReview}
	overloadValidate  = server.InFlightLimit{MaxInFlight: 2, MaxQueued: 8, MaxWait: 250 * time.Millisecond, Shed: server.ShedAdmissionReview}
)

// bigReviewBytes is the size of the large /validate bodies: a Node status
// update whose objects carry a large annotation each.
const bigReviewBytes = 1 << 20

// overloadScale is how many requests the bursts send: the default run
// takes seconds; NODEGUARD_SOAK=1 sends ten times as many.
func overloadScale() int {
	if os.Getenv("NODEGUARD_SOAK") == "1" {
		return 10
	}
	return 1
}

// stall holds every review that reaches it while on, as a long GC pause
// or a slow policy would, so that a test can fill the slots at will.
type stall struct{ gate atomic.Pointer[chan struct{}] }

func (s *stall) on() {
	ch := make(chan struct{})
	s.gate.Store(&ch)
}

func (s *stall) off() {
	if ch := s.gate.Swap(nil); ch != nil {
		close(*ch)
	}
}

// wrap stalls review once it has read the request's body, counting in
// entered the reviews that reach it.
func (s *stall) wrap(review http.Handler, entered *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		entered.Add(1)
		if ch := s.gate.Load(); ch != nil {
			select {
			case <-*ch:
			case <-r.Context().Done():
			}
		}
		review.ServeHTTP(w, r)
	})
}

type overloadEnv struct {
	authorizeURL, validateURL string
	roots                     *x509.CertPool
	registry                  *prometheus.Registry
	stall                     *stall
	// validateEntered counts the /validate reviews that were read and
	// reached the decision.
	validateEntered atomic.Int64
	// authzRequests are what the authorize bodies ask, in order.
	authzRequests []cluster.Request
	authzBodies   [][]byte
}

// startOverload serves /authorize and /validate as cmd/webhook does, each
// behind its in-flight limit, with a stall in front of the decisions.
func startOverload(t *testing.T) *overloadEnv {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := server.TLSFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	for path, data := range map[string][]byte{files.CertFile: certPEM, files.KeyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsConfig, err := server.NewDynamicTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &overloadEnv{roots: x509.NewCertPool(), registry: prometheus.NewRegistry(), stall: &stall{}}
	e.roots.AppendCertsFromPEM(certPEM)
	srv, err := server.New(server.Config{Listener: listener, TLS: tlsConfig, Registry: e.registry, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	shape := cluster.Shape{Nodes: 200, PodsPerNode: 5, Namespaces: 10, EligibleConfigMaps: 100}
	authorizer, _ := newGraphAuthorizer(t, shape)
	var authorizeEntered atomic.Int64
	mount := func(path string, limit server.InFlightLimit, review http.Handler, entered *atomic.Int64) {
		h, err := srv.LimitInFlight(path, limit, e.stall.wrap(review, entered))
		if err != nil {
			t.Fatal(err)
		}
		srv.HandleReview(path, h)
	}
	mount("/authorize", overloadAuthorize, server.Authorize(authorizer, nil, maxReviewBytes), &authorizeEntered)
	mount("/validate", overloadValidate, server.Validate(newValidateAdmitter(t, shape), nil, validateMaxBody), &e.validateEntered)

	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().V(100)))
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		e.stall.off()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	base := "https://" + listener.Addr().String()
	// The timeouts the shipped configurations give the apiserver.
	e.authorizeURL, e.validateURL = base+"/authorize?timeout=3s", base+"/validate?timeout=5s"
	e.authzRequests = shape.Mixed(requestKinds, 256, 7)
	for _, r := range e.authzRequests {
		body, err := json.Marshal(r.Review())
		if err != nil {
			t.Fatal(err)
		}
		e.authzBodies = append(e.authzBodies, body)
	}
	return e
}

// shedTotal is the server's count of shed requests on endpoint.
func (e *overloadEnv) shedTotal(t *testing.T, endpoint string) int64 {
	t.Helper()
	families, err := e.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, f := range families {
		if f.GetName() != "nodeguard_http_requests_shed_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "endpoint" && l.GetValue() == endpoint {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int64(total)
}

// tally counts the answers of a run by kind; a malformed one ends the run.
// A review that reached the decision after its deadline had passed (a
// stall longer than the apiserver's timeout) is answered, well-formed, as
// timed out, and counted as decided.
type tally struct{ decided, shed atomic.Int64 }

// checkAuthorize accepts the decision the graph calls for, or a shed
// answer: no opinion with an evaluation error naming the overload.
func (e *overloadEnv) checkAuthorize(p Protocol, n *tally) func(int, *http.Response, []byte) error {
	return func(i int, resp *http.Response, body []byte) error {
		status, err := decodeReview(p, resp, body)
		if err != nil {
			return err
		}
		if status.EvaluationError != "" {
			switch {
			case status.Allowed || status.Denied:
				return fmt.Errorf("a decision with an evaluation error: %+v", status)
			case strings.Contains(status.EvaluationError, "overloaded"):
				n.shed.Add(1)
			case status.Reason == authz.ReasonTimedOut:
				n.decided.Add(1)
			default:
				return fmt.Errorf("unexpected evaluation error: %+v", status)
			}
			return nil
		}
		want := e.authzRequests[i%len(e.authzRequests)]
		if status.Allowed != want.Allowed || status.Reason == "" {
			return fmt.Errorf("%s: got %+v, want allowed=%v with a reason", want.Kind, status, want.Allowed)
		}
		n.decided.Add(1)
		return nil
	}
}

// checkValidate accepts an allowed review for the request's UID, or a shed
// answer: refused with a 429 status for the same UID, or HTTP 429 with
// Retry-After.
func checkValidate(uid string, n *tally) func(int, *http.Response, []byte) error {
	return func(_ int, resp *http.Response, body []byte) error {
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" {
			n.shed.Add(1)
			return nil
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s: %.200s", resp.Status, body)
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Response == nil || review.APIVersion != "admission.k8s.io/v1" {
			return fmt.Errorf("not an AdmissionReview (%v): %.200s", err, body)
		}
		r := review.Response
		if string(r.UID) != uid {
			return fmt.Errorf("answer for UID %q, want %q", r.UID, uid)
		}
		if r.Result != nil && r.Result.Code == http.StatusTooManyRequests && !r.Allowed && strings.Contains(r.Result.Message, "overloaded") {
			n.shed.Add(1)
			return nil
		}
		// A review held by the stall past its deadline is refused as such.
		if !r.Allowed && (r.Result == nil || !strings.Contains(r.Result.Message, "deadline passed before a decision")) {
			return fmt.Errorf("refused: %+v", r.Result)
		}
		n.decided.Add(1)
		return nil
	}
}

// bigStatusUpdate is the node status update of validateBodies with a
// padding annotation on both objects, bringing it to about size bytes.
func bigStatusUpdate(t *testing.T, size int) []byte {
	t.Helper()
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(validateBodies(t)["node status update"], &review); err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	if err := json.Unmarshal(review.Request.Object.Raw, &node); err != nil {
		t.Fatal(err)
	}
	node.Annotations["example.com/padding"] = strings.Repeat("p", size/2)
	raw, err := json.Marshal(&node)
	if err != nil {
		t.Fatal(err)
	}
	review.Request.Object.Raw, review.Request.OldObject.Raw = raw, raw
	body, err := json.Marshal(&review)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// heapPeak samples the heap until stopped: the largest HeapAlloc seen
// (runtime.ReadMemStats), which includes garbage not yet collected, and the
// largest live heap (the bytes the last collection marked live).
type heapPeak struct {
	peak, livePeak atomic.Uint64
	stop           chan struct{}
	done           chan struct{}
}

func sampleHeap() *heapPeak {
	h := &heapPeak{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		ticker := time.NewTicker(5 * time.Millisecond)
		defer ticker.Stop()
		var ms runtime.MemStats
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			runtime.ReadMemStats(&ms)
			metrics.Read(live)
			h.peak.Store(max(h.peak.Load(), ms.HeapAlloc))
			if live[0].Value.Kind() == metrics.KindUint64 {
				h.livePeak.Store(max(h.livePeak.Load(), live[0].Value.Uint64()))
			}
			select {
			case <-h.stop:
				return
			case <-ticker.C:
			}
		}
	}()
	return h
}

// Stop ends the sampling and returns the peaks: HeapAlloc and live heap.
func (h *heapPeak) Stop() (heapAlloc, live uint64) {
	close(h.stop)
	<-h.done
	return h.peak.Load(), h.livePeak.Load()
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// TestOverload sends bursts far above the endpoints' limits and checks that
// every answer is a well-formed decision or shed answer, that the server's
// shed counter matches the shed answers clients saw, that the heap stays
// within what the limits allow, and that the server then serves normally.
func TestOverload(t *testing.T) {
	e := startOverload(t)
	scale := overloadScale()
	uid := "00000000-0000-0000-0000-000000000001"
	statusUpdate := validateBodies(t)["node status update"]
	big := bigStatusUpdate(t, bigReviewBytes)
	goroutinesBefore := runtime.NumGoroutine()
	var report strings.Builder
	var counters []string
	fmt.Fprintf(&report, "| phase | load | requests | decided | shed | malformed or failed |\n| --- | --- | --- | --- | --- | --- |\n")

	type run struct {
		name, endpoint string
		load           Load
		n              *tally
	}
	// runAll runs the loads at once and checks each one's tallies against
	// the server's shed counter.
	runAll := func(phase string, runs []run, during func()) {
		t.Helper()
		before := map[string]int64{}
		for _, ep := range []string{"/authorize", "/validate"} {
			before[ep] = e.shedTotal(t, ep)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(runs))
		for i, r := range runs {
			wg.Go(func() {
				res, err := r.load.Run(context.Background())
				if err == nil && res.Requests != r.load.Requests {
					err = fmt.Errorf("%d of %d requests answered", res.Requests, r.load.Requests)
				}
				errs[i] = err
			})
		}
		if during != nil {
			during()
		}
		wg.Wait()
		clientSheds := map[string]int64{}
		for i, r := range runs {
			if errs[i] != nil {
				t.Fatalf("%s, %s: %v", phase, r.name, errs[i])
			}
			if got := r.n.decided.Load() + r.n.shed.Load(); got != int64(r.load.Requests) {
				t.Fatalf("%s, %s: %d answers tallied, want %d", phase, r.name, got, r.load.Requests)
			}
			clientSheds[r.endpoint] += r.n.shed.Load()
		}
		for _, r := range runs {
			fmt.Fprintf(&report, "| %s | %s | %d | %d | %d | 0 |\n", phase, r.name, r.load.Requests, r.n.decided.Load(), r.n.shed.Load())
		}
		for _, ep := range []string{"/authorize", "/validate"} {
			counted := e.shedTotal(t, ep) - before[ep]
			if counted != clientSheds[ep] {
				t.Fatalf("%s: %s shed counter rose by %d, clients saw %d shed answers", phase, ep, counted, clientSheds[ep])
			}
			counters = append(counters, fmt.Sprintf("%s %s +%d", phase, ep, counted))
		}
	}
	h2, h1 := NewClient(HTTP2, e.roots, 64), NewClient(HTTP1, e.roots, 512)
	authorizeLoad := func(p Protocol, c *http.Client, requests, concurrency int, n *tally) Load {
		return Load{Client: c, URL: e.authorizeURL, Bodies: e.authzBodies, Requests: requests, Concurrency: concurrency, Check: e.checkAuthorize(p, n)}
	}
	validateLoad := func(c *http.Client, body []byte, requests, concurrency int, n *tally) Load {
		return Load{Client: c, URL: e.validateURL, Bodies: [][]byte{body}, Requests: requests, Concurrency: concurrency, Check: checkValidate(uid, n)}
	}

	// 1. A stall: nothing is decided while the burst arrives, so all but
	// the slots and the queues must be shed, and once the stall ends the
	// rest is decided. The large /validate bodies wait here: a limiter
	// that read bodies before waiting would hold all 300 in the heap.
	heapBefore := liveHeap()
	peak := sampleHeap()
	stalledAuthorize, stalledValidate := &tally{}, &tally{}
	e.stall.on()
	runAll("stall", []run{
		{"authorize h2", "/authorize", authorizeLoad(HTTP2, h2, 2000*scale, 200, stalledAuthorize), stalledAuthorize},
		{"validate 1 MiB http/1.1", "/validate", validateLoad(h1, big, 600*scale, 300, stalledValidate), stalledValidate}, // 300 connections
	}, func() {
		// Released once 300 large bodies have arrived, shed or held.
		validateBefore := e.validateEntered.Load()
		err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return e.shedTotal(t, "/authorize") >= int64(500*scale) &&
				e.shedTotal(t, "/validate")+e.validateEntered.Load()-validateBefore >= int64(300*scale), nil
		})
		e.stall.off()
		if err != nil {
			t.Errorf("stalled server shed %d authorize and %d validate requests, want at least %d and %d: %v",
				e.shedTotal(t, "/authorize"), e.shedTotal(t, "/validate"), 500*scale, 300*scale, err)
		}
	})
	if stalledAuthorize.decided.Load() < int64(overloadAuthorize.MaxInFlight) || stalledValidate.decided.Load() < int64(overloadValidate.MaxInFlight) {
		t.Fatalf("only %d authorize and %d validate requests decided around the stall", stalledAuthorize.decided.Load(), stalledValidate.decided.Load())
	}

	// 2. An open burst on both endpoints over both protocols, the large
	// /validate bodies among them.
	tallies := []*tally{{}, {}, {}, {}}
	runAll("burst", []run{
		{"authorize h2", "/authorize", authorizeLoad(HTTP2, h2, 6000*scale, 400, tallies[0]), tallies[0]},
		{"authorize http/1.1", "/authorize", authorizeLoad(HTTP1, h1, 3000*scale, 200, tallies[1]), tallies[1]}, // 200 connections
		{"validate 17 KB h2", "/validate", validateLoad(h2, statusUpdate, 2000*scale, 200, tallies[2]), tallies[2]},
		{"validate 1 MiB http/1.1", "/validate", validateLoad(h1, big, 600*scale, 300, tallies[3]), tallies[3]}, // 300 connections
	}, nil)
	heapPeak, livePeak := peak.Stop()
	// What the limits allow: the bodies being decided, each held about
	// four times over while decoded, plus what each connection costs both
	// of its ends in this one process (TLS record buffers, bufio readers
	// and writers, handshake keys: about 130 KiB per HTTP/1.1 connection
	// in a heap profile), plus a fixed 16 MiB for HTTP/2 (up to 1 MiB of
	// unread body per connection on the server side) and the test's own
	// tallies. The large bodies go over HTTP/1.1, where a client holds
	// little per request (Go's HTTP/2 client takes a 512 KiB buffer per
	// stream sending one). Without the limit, the 300 large bodies held
	// during the stall alone would take 300 MiB.
	h1Conns := 200 + 300
	allowed := heapBefore + uint64(4*overloadValidate.MaxInFlight*len(big)) + uint64(h1Conns)*160<<10 + 16<<20
	if livePeak > allowed {
		t.Errorf("live heap peaked at %s during the burst, more than the %s the limits allow", mib(livePeak), mib(allowed))
	}

	// 3. Afterwards, at a load within the limits, everything is decided.
	after := []*tally{{}, {}}
	runAll("after", []run{
		{"authorize h2", "/authorize", authorizeLoad(HTTP2, h2, 500, overloadAuthorize.MaxInFlight, after[0]), after[0]},
		{"validate 17 KB h2", "/validate", validateLoad(h2, statusUpdate, 200, overloadValidate.MaxInFlight, after[1]), after[1]},
	}, nil)
	for i, n := range after {
		if n.shed.Load() != 0 {
			t.Fatalf("after the burst, run %d still saw %d sheds", i, n.shed.Load())
		}
	}
	h2.CloseIdleConnections()
	h1.CloseIdleConnections()
	heapAfter := liveHeap()
	var goroutinesAfter int
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		goroutinesAfter = runtime.NumGoroutine()
		return goroutinesAfter <= goroutinesBefore+10, nil
	}); err != nil {
		t.Errorf("%d goroutines after the burst, %d before", goroutinesAfter, goroutinesBefore)
	}
	fmt.Fprintf(&report, "\nserver shed counter: %s\n", strings.Join(counters, ", "))
	fmt.Fprintf(&report, "\nheap before the burst %s (live after GC); during it live heap peak %s (bound %s), HeapAlloc peak %s; after it %s (live after GC); goroutines %d before, %d after\n",
		mib(heapBefore), mib(livePeak), mib(allowed), mib(heapPeak), mib(heapAfter), goroutinesBefore, goroutinesAfter)
	t.Logf("limits: /authorize %d in flight + %d queued, /validate %d + %d, wait at most %v\n%s",
		overloadAuthorize.MaxInFlight, overloadAuthorize.MaxQueued, overloadValidate.MaxInFlight, overloadValidate.MaxQueued, overloadAuthorize.MaxWait, report.String())
}
