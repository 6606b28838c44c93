package reliability_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
	"github.com/nodeguard/nodeguard/test/e2e/reliability"
)

// replicaDrain is the replicas' --shutdown-drain-duration: many times the
// load balancer's readiness poll, so that a stopping replica is out of
// rotation well before it stops serving.
const replicaDrain = "--shutdown-drain-duration=1s"

// trafficNode is the node the traffic speaks for.
const trafficNode = "reliability-node"

// registerTrafficNode creates the traffic's node as an administrator, once,
// and returns a client with its kubelet's credentials and no client-side
// rate limit.
func registerTrafficNode(t *testing.T) kubernetes.Interface {
	t.Helper()
	ctx := t.Context()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: trafficNode}}
	created, err := env.Admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
	case err != nil:
		t.Fatal(err)
	default:
		created.Status.NodeInfo.KubeletVersion = "v1.37.2"
		if _, err := env.Admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := env.NodeRESTConfig(trafficNode)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// webhookTraffic is continuous traffic of four kinds, all of which reach
// the webhook at base: the node's own requests through the real
// kube-apiserver (a read the authorizer must refuse, with a name never
// asked before so that the apiserver's cache of webhook answers cannot
// answer it; a patch of its Node, which admission must allow), and
// reviews posted straight to base as the apiserver would.
func webhookTraffic(t *testing.T, base string, direct *http.Client) map[string]request {
	node := registerTrafficNode(t)
	sar := reviewBody(t, &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:node:" + trafficNode, Groups: []string{"system:nodes", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Version: "v1", Namespace: "default", Name: "absent"}},
	})
	nodeJSON := reviewBody(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: trafficNode}})
	return map[string]request{
		"apiserver: node reads a ConfigMap (/authorize refuses)": func(ctx context.Context, w, i int) error {
			_, err := node.CoreV1().ConfigMaps("default").Get(ctx, fmt.Sprintf("absent-%d-%d-%d", time.Now().UnixNano(), w, i), metav1.GetOptions{})
			if apierrors.IsForbidden(err) {
				return nil
			}
			return fmt.Errorf("want Forbidden, got %v", err)
		},
		"apiserver: node patches its Node (/validate allows)": func(ctx context.Context, w, i int) error {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.nodeguard.dev/beat-%d":"%d"}}}`, w, i)
			_, err := node.CoreV1().Nodes().Patch(ctx, trafficNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		},
		"direct: SubjectAccessReview": func(ctx context.Context, _, _ int) error {
			body, err := post(ctx, direct, base+"/authorize?timeout=3s", sar)
			if err != nil {
				return err
			}
			var got authorizationv1.SubjectAccessReview
			if err := json.Unmarshal(body, &got); err != nil || got.Kind != "SubjectAccessReview" || got.Status.Allowed || got.Status.Reason == "" {
				return fmt.Errorf("want no opinion with a reason, got %s (%v)", body, err)
			}
			return nil
		},
		"direct: AdmissionReview": func(ctx context.Context, w, i int) error {
			uid := fmt.Sprintf("uid-%d-%d", w, i)
			review := reviewBody(t, &admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{UID: types.UID(uid), Operation: admissionv1.Update, Name: trafficNode,
					Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
					Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
					UserInfo: authenticationv1.UserInfo{Username: "system:node:" + trafficNode, Groups: []string{"system:nodes"}},
					Object:   runtime.RawExtension{Raw: nodeJSON}, OldObject: runtime.RawExtension{Raw: nodeJSON}},
			})
			body, err := post(ctx, direct, base+"/validate?timeout=5s", review)
			if err != nil {
				return err
			}
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(body, &got); err != nil || got.Response == nil || string(got.Response.UID) != uid || !got.Response.Allowed {
				return fmt.Errorf("want allowed for %s, got %s (%v)", uid, body, err)
			}
			return nil
		},
	}
}

func reviewBody(t *testing.T, v any) []byte {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// post sends a review and returns the body of a 200 answer.
func post(ctx context.Context, c *http.Client, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s: %s", resp.Status, answer)
	}
	return answer, nil
}

// backendTLS is how the apiserver (and so the load balancer) reaches the
// webhook: trusting its serving CA, presenting the client certificate its
// client CA signed.
func backendTLS(t *testing.T) *tls.Config {
	t.Helper()
	transport, ok := env.ProbeClient.Transport.(*http.Transport)
	if !ok || transport.TLSClientConfig == nil {
		t.Fatal("the probe client has no TLS configuration")
	}
	return transport.TLSClientConfig.Clone()
}

// startLoadBalancer takes the webhook's address from the Env's own webhook
// process, which it stops, so that the apiserver's webhook configurations
// now reach the replicas through the load balancer. Cleanup puts the Env's
// webhook back.
func startLoadBalancer(t *testing.T, replicas ...*framework.Replica) *reliability.LoadBalancer {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(env.WebhookArg("--tls-cert-file"), env.WebhookArg("--tls-private-key-file"))
	if err != nil {
		t.Fatal(err)
	}
	address, err := url.Parse(env.WebhookURL)
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]string{}
	for _, r := range replicas {
		backends[r.Name] = r.URL
	}
	env.StopWebhook()
	listener, err := net.Listen("tcp", address.Host)
	if err != nil {
		t.Fatalf("taking over the webhook's address: %v", err)
	}
	lb, err := reliability.NewLoadBalancer(reliability.LoadBalancerConfig{Listener: listener, ServingCert: cert, BackendTLS: backendTLS(t), Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lb.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("load balancer: %v", err)
		}
		if err := env.StartWebhook(context.Background()); err != nil {
			t.Errorf("restarting the Env's webhook: %v", err)
		}
	})
	return lb
}

// TestRollingRestartUnderLoad restarts two replicas behind the load
// balancer one after the other, while the node's requests through the
// apiserver and reviews posted straight to the load balancer keep coming:
// not one may fail, at the clients or at the load balancer.
func TestRollingRestartUnderLoad(t *testing.T) {
	rounds := 1
	if soak() {
		rounds = 10
	}
	ctx := t.Context()
	a, err := env.StartReplica(ctx, "a", replicaDrain)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.StartReplica(ctx, "b", replicaDrain)
	if err != nil {
		_ = a.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := framework.StopReplicas(a, b); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("replica a log tail:\n%s\n\nreplica b log tail:\n%s", a.LogTail(40), b.LogTail(40))
		}
	})
	lb := startLoadBalancer(t, a, b)
	backends := map[string]*reliability.Backend{}
	for _, be := range lb.Backends {
		backends[be.Name] = be
	}
	direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: backendTLS(t), ForceAttemptHTTP2: true}}
	tr := startTraffic(webhookTraffic(t, env.WebhookURL, direct), 2)
	t.Cleanup(tr.stop)
	tr.waitMore(t, 20, "before the restarts")

	for round := range rounds {
		for _, r := range []*framework.Replica{a, b} {
			// SIGTERM: /readyz fails, the load balancer stops routing to
			// it, it drains and exits; Stop returns once it has exited.
			if err := r.Stop(); err != nil {
				t.Fatal(err)
			}
			tr.waitMore(t, 10, fmt.Sprintf("with %s stopped (round %d)", r.Name, round+1))
			servedBefore := backends[r.Name].Served.Load()
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			err := framework.Eventually(ctx, time.Minute, r.Name+" back in rotation", func(context.Context) (bool, string, error) {
				return backends[r.Name].Served.Load() > servedBefore, fmt.Sprintf("ready at the load balancer: %v", backends[r.Name].Ready()), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			tr.waitMore(t, 10, fmt.Sprintf("with %s back (round %d)", r.Name, round+1))
		}
	}
	tr.stop()
	ok, failed := tr.totals()
	lbRequests, lbFailures, lbFirst := lb.Counts()
	t.Logf("%d rolling restart round(s) of 2 replicas (drain %s, readiness polled every %v)\n%s\nload balancer: %d requests, %d failed, %d given up by their caller before their timeout; a served %d, b served %d",
		rounds, replicaDrain, reliability.ReadyPollInterval, tr.table(), lbRequests, lbFailures, lb.Abandoned(), backends["a"].Served.Load(), backends["b"].Served.Load())
	if failed != 0 || lbFailures != 0 {
		t.Fatalf("%d of %d requests failed at the clients (%s); %d of %d at the load balancer: %v",
			failed, ok+failed, tr.failureSummary(), lbFailures, lbRequests, lbFirst)
	}
}
