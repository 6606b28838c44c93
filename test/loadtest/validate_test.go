package loadtest

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/server"
	"github.com/nodeguard/nodeguard/pkg/settings"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// The targets for /validate.
const (
	validateTargetFraction = 0.60
	validateTargetP99      = 3 * time.Millisecond
	// validateMaxBody is cmd/webhook's default --max-validate-body-bytes.
	validateMaxBody = 7 << 20
)

// The pool ConfigMap the /validate load updates, and the node whose
// status updates it sends.
const (
	poolNamespace = "kubelet-configs"
	poolName      = "pool"
	statusNode    = "node-1"
)

// validateBodies are the two requests the issue names: a kubelet's Node
// status update (the most frequent request in a cluster) and an update of
// an eligible ConfigMap holding a 4 KiB KubeletConfiguration.
func validateBodies(tb testing.TB) map[string][]byte {
	tb.Helper()
	nodeJSON := mustJSON(tb, cluster.StatusUpdateNode(statusNode, poolNamespace+"/"+poolName))
	return map[string][]byte{
		"node status update": reviewBody(tb, admissionv1.AdmissionRequest{UID: "00000000-0000-0000-0000-000000000001",
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, SubResource: "status", Name: statusNode, Operation: admissionv1.Update,
			UserInfo: authenticationv1.UserInfo{Username: "system:node:" + statusNode, Groups: []string{"system:nodes", "system:authenticated"}},
			Object:   runtime.RawExtension{Raw: nodeJSON}, OldObject: runtime.RawExtension{Raw: nodeJSON}}),
		"ConfigMap update (4 KiB config)": poolUpdate(tb, 1, 120, 110),
	}
}

// uniqueConfigMapUpdates are n updates of the 4 KiB ConfigMap, each with
// content no other has, more than admission's cache of decoded
// configurations holds: the cost of a real edit, where the repeated
// update of validateBodies is the cost of a re-apply (GitOps syncs,
// dry runs) or of the same pool reaching admission again.
func uniqueConfigMapUpdates(tb testing.TB, n int) [][]byte {
	tb.Helper()
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = poolUpdate(tb, i, 1+2*i, 2+2*i)
	}
	return bodies
}

// poolUpdate is an administrator's update of the pool ConfigMap from a
// configuration with oldMaxPods to one with newMaxPods.
func poolUpdate(tb testing.TB, uid, newMaxPods, oldMaxPods int) []byte {
	tb.Helper()
	cm := func(maxPods int) runtime.RawExtension {
		return runtime.RawExtension{Raw: mustJSON(tb, cluster.PoolConfigMap(poolNamespace, poolName, fmt.Sprintf("maxPods: %d\n", maxPods)))}
	}
	return reviewBody(tb, admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", uid)),
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: poolNamespace, Name: poolName, Operation: admissionv1.Update,
		UserInfo: authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}},
		Object:   cm(newMaxPods), OldObject: cm(oldMaxPods)})
}

func reviewBody(tb testing.TB, req admissionv1.AdmissionRequest) []byte {
	tb.Helper()
	return mustJSON(tb, admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// startValidate serves /validate as cmd/webhook does and a floor beside it,
// with a self-signed certificate (certPEM).
func startValidate(tb testing.TB, shape cluster.Shape) (ours, floor string, certPEM []byte) {
	tb.Helper()
	dir := tb.TempDir()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	files := server.TLSFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	for path, data := range map[string][]byte{files.CertFile: certPEM, files.KeyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	tlsConfig, err := server.NewDynamicTLS(files)
	if err != nil {
		tb.Fatal(err)
	}
	admitter := newValidateAdmitter(tb, shape)

	var listeners []net.Listener
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		listeners = append(listeners, l)
	}
	srv, err := server.New(server.Config{Listener: listeners[0], TLS: tlsConfig, Registry: prometheus.NewRegistry(), ShutdownTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().V(100)))
	srv.HandleReview("/validate", server.Validate(admitter, nil, validateMaxBody))
	floorSrv := &http.Server{TLSConfig: tlsConfig.Config(), ReadHeaderTimeout: 10 * time.Second, Handler: FloorHandler(AdmissionFloorResponse)}
	done := make(chan struct{}, 2)
	go func() { _ = srv.Run(ctx); done <- struct{}{} }()
	go func() { _ = floorSrv.ServeTLS(listeners[1], "", ""); done <- struct{}{} }()
	tb.Cleanup(func() {
		cancel()
		_ = floorSrv.Close()
		<-done
		<-done
	})
	return "https://" + listeners[0].Addr().String() + "/validate?timeout=10s", "https://" + listeners[1].Addr().String() + "/validate?timeout=10s", certPEM
}

// rootsOf trusts one PEM certificate.
func rootsOf(certPEM []byte) *x509.CertPool {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	return roots
}

// newValidateAdmitter judges reviews as cmd/webhook does, over a graph of
// the given shape plus 50 nodes assigned the eligible ConfigMap
// kubelet-configs/pool. The benchmarks use benchShape, the cluster of the
// /authorize load test: the webhook's heap holds its graph, and the heap's
// size sets how often the collector runs.
func newValidateAdmitter(tb testing.TB, shape cluster.Shape) *admission.Admitter {
	tb.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = indexer.Add(cluster.PoolConfigMap(poolNamespace, poolName, ""))
	_, g := newGraphAuthorizer(tb, shape)
	for i := range 50 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), ResourceVersion: "1",
			Annotations: map[string]string{contract.ConfigSourceAnnotation: poolNamespace + "/" + poolName}}}
		n.Status.NodeInfo.KubeletVersion = "v1.37.2"
		g.UpsertNode(n)
	}
	g.UpsertConfigMap(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: poolNamespace, Name: poolName,
		Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}}})
	s := settings.Default()
	return admission.New(func() *settings.Settings { return s }, corelisters.NewConfigMapLister(indexer), g)
}

// checkAllowed fails a response that is not an allowed AdmissionReview.
func checkAllowed(_ int, resp *http.Response, body []byte) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s: %s", resp.Status, body)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Response == nil || !review.Response.Allowed {
		return fmt.Errorf("not an allowed review (%v): %s", err, body)
	}
	return nil
}

// TestValidateSmoke checks, without timing anything, that every request of
// the load is answered allowed by both servers.
func TestValidateSmoke(t *testing.T) {
	ours, floor, certPEM := startValidate(t, smokeShape)
	roots := rootsOf(certPEM)
	client := NewClient(HTTP2, roots, 4)
	defer client.CloseIdleConnections()
	for name, body := range validateBodies(t) {
		for _, url := range []string{ours, floor} {
			if _, err := (Load{Client: client, URL: url, Bodies: [][]byte{body}, Concurrency: 4, Requests: 40, Check: checkAllowed}).Run(t.Context()); err != nil {
				t.Fatalf("%s to %s: %v", name, url, err)
			}
		}
	}
}

// validateOpenLoopRate is the offered load of a request's latency run:
// the status updates of a 20,000-node cluster reporting every 10 s for
// Node status, and, for ConfigMap edits (a few an hour in a real
// cluster), far more than any cluster sends.
func validateOpenLoopRate(name string) float64 {
	if strings.HasPrefix(name, "ConfigMap") {
		return 100
	}
	return openLoopRate
}

// BenchmarkValidate loads /validate over HTTPS (h2, 64 in flight, closed
// loop) beside the floor, in alternating rounds, then measures latency at
// a steady offered load (open loop), and prints both against the issue's
// targets.
func BenchmarkValidate(b *testing.B) {
	// The servers run in a process of their own, as the webhook does
	// beside the apiserver: the load generator's allocations must not
	// drive their collector.
	ours, floor, roots, gc := startValidateProcess(b)
	stalls := MeasureStalls(2 * time.Second)
	type row struct {
		ours, floor []Result
		open        Result
	}
	results := map[string]*row{}
	bodies := map[string][][]byte{}
	for name, body := range validateBodies(b) {
		bodies[name+" (repeated)"] = [][]byte{body}
	}
	bodies["ConfigMap update (4 KiB config, new content each time)"] = uniqueConfigMapUpdates(b, 4*kubeletconfig.DefaultCheckerEntries)
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range bodies {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		results[name] = &row{}
		for round := range loadRounds {
			for _, target := range []struct {
				label, url string
				into       *[]Result
			}{{"floor", floor, &results[name].floor}, {"nodeguard", ours, &results[name].ours}} {
				client := NewClient(HTTP2, roots, concurrency)
				var last Result
				b.Run(fmt.Sprintf("%s/%s/round%d", strings.ReplaceAll(name, " ", "-"), target.label, round), func(b *testing.B) {
					res, err := Load{Client: client, URL: target.url, Bodies: bodies[name], Concurrency: concurrency,
						Requests: max(b.N, 2000), Check: checkAllowed}.Run(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(res.Throughput(), "req/s")
					b.ReportMetric(float64(res.Percentile(0.99).Microseconds()), "p99-µs")
					last = res
				})
				client.CloseIdleConnections()
				if last.Requests > 0 {
					*target.into = append(*target.into, last)
				}
			}
		}
		// Latency at a steady offered load, where the closed loop's 64
		// requests always in flight measure the queue (Little's law).
		client := NewClient(HTTP2, roots, concurrency)
		rate := validateOpenLoopRate(name)
		b.Run(fmt.Sprintf("%s/nodeguard/open-loop", strings.ReplaceAll(name, " ", "-")), func(b *testing.B) {
			res, err := Load{Client: client, URL: ours, Bodies: bodies[name], Concurrency: concurrency,
				Requests: int(5 * rate), Rate: rate, Check: checkAllowed}.Run(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res.Percentile(0.99).Microseconds()), "p99-µs")
			results[name].open = res
		})
		client.CloseIdleConnections()
	}
	if b.Failed() {
		return
	}
	gcSettings := "Go's defaults (" + validateGCEnv + "=go-defaults)"
	if len(gc) > 0 {
		gcSettings = strings.Join(gc, " ") + ", as manifests/base ships them"
	}
	fmt.Printf("\nServer process's collector: %s.\n", gcSettings)
	fmt.Printf("\nMachine stalls before the load (one goroutine spinning for %v): %d over 1ms, longest %v.\n\n", stalls.Probed, stalls.Count, stalls.Max)
	fmt.Println("| request | nodeguard throughput | floor throughput | ratio (median round) | target | closed loop p50 / p99 | open loop | p50 / p99 | p99 target |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "**MISS**"
	}
	for _, name := range names {
		r := results[name]
		ratio := medianRatio(r.ours, r.floor)
		all := pooled(r.ours)
		fmt.Printf("| %s | %.0f req/s | %.0f req/s | %.2f | >= %.2f %s | %s / %s | %.0f req/s | %s / %s | < %s %s |\n", name,
			medianThroughput(r.ours), medianThroughput(r.floor), ratio, validateTargetFraction, verdict(ratio >= validateTargetFraction),
			ms(all.Percentile(0.5)), ms(all.Percentile(0.99)), validateOpenLoopRate(name),
			ms(r.open.Percentile(0.5)), ms(r.open.Percentile(0.99)), ms(validateTargetP99), verdict(r.open.Percentile(0.99) < validateTargetP99))
	}
}
