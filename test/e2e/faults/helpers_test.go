package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

const (
	// revocationDeadline bounds how long a revoked read may still pass the
	// apiserver after the webhook has the revocation: the shipped
	// authorizedTTL (10s) plus graph lag, with room for a busy machine.
	revocationDeadline = 45 * time.Second
	// recoveryDeadline bounds how long the informers take to come back
	// after a cut ends: the reflector's retry backoff (doubling from
	// 800ms, capped at 30s) on top of the relist.
	recoveryDeadline = 90 * time.Second

	kubeletConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
)

var nodeGroups = []string{"system:nodes", "system:authenticated"}

// newNamespace creates a namespace for one test; nodes are named after it.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := "faults-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// eligibleConfigMap creates a labelled ConfigMap holding a valid config.
func eligibleConfigMap(ctx context.Context, namespace, name string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
		Data: map[string]string{contract.ConfigMapKey: kubeletConfig}}
	_, err := admin.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// registerNode creates a Node as an admin, assigned to namespace/assigned
// when that is not empty.
func registerNode(ctx context.Context, name, namespace, assigned string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if assigned != "" {
		n.Annotations = map[string]string{contract.ConfigSourceAnnotation: namespace + "/" + assigned}
	}
	_, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	return err
}

func deleteNodeOnCleanup(t *testing.T, name string) {
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// boundPod creates a pod bound to node that mounts configMap.
func boundPod(ctx context.Context, namespace, name, node, configMap string) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}}}}
	_, err := admin.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
	return err
}

// sarBody is a SubjectAccessReview for node getting namespace/name.
func sarBody(node, namespace, name string) []byte {
	body, err := json.Marshal(&authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:node:" + node, Groups: nodeGroups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Version: "v1", Resource: "configmaps", Name: name}},
	})
	if err != nil {
		panic(err) // a fixed, always-encodable value
	}
	return body
}

// nodeStatusReviewBody is an AdmissionReview of node updating its own
// status, which the webhook must always admit.
func nodeStatusReviewBody(node string) []byte {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, ResourceVersion: "1"}}
	n.Status.NodeInfo.KubeletVersion = "v1.37.2"
	raw, err := json.Marshal(n)
	if err != nil {
		panic(err)
	}
	req := admissionv1.AdmissionRequest{UID: "00000000-0000-0000-0000-000000000007",
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, SubResource: "status", Name: node, Operation: admissionv1.Update,
		UserInfo: authenticationv1.UserInfo{Username: "system:node:" + node, Groups: nodeGroups},
		Object:   runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw}}
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	if err != nil {
		panic(err)
	}
	return body
}

// answer is the webhook's answer to one review.
type answer struct {
	allowed bool
	reason  string
}

// post sends a review to the webhook as the apiserver does and decodes its
// answer; anything but a well-formed 200 is an error.
func post(ctx context.Context, path string, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.WebhookURL+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := env.ProbeClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, fmt.Errorf("%s: reading: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return answer{}, fmt.Errorf("%s: %s: %s", path, resp.Status, raw)
	}
	switch path {
	case "/authorize":
		var sar authorizationv1.SubjectAccessReview
		if err := json.Unmarshal(raw, &sar); err != nil || sar.Status.Reason == "" || (sar.Status.Allowed && sar.Status.Denied) {
			return answer{}, fmt.Errorf("%s: malformed answer (%v): %s", path, err, raw)
		}
		return answer{allowed: sar.Status.Allowed, reason: sar.Status.Reason}, nil
	default:
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(raw, &review); err != nil || review.Response == nil {
			return answer{}, fmt.Errorf("%s: malformed answer (%v): %s", path, err, raw)
		}
		reason := ""
		if review.Response.Result != nil {
			reason = review.Response.Result.Message
		}
		return answer{allowed: review.Response.Allowed, reason: reason}, nil
	}
}

// get fetches one of the webhook's endpoints.
func get(ctx context.Context, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.WebhookURL+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := env.ProbeClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metric returns the value of the first /metrics sample whose line starts
// with series (a name, or a name with its labels).
func metric(ctx context.Context, series string) (float64, error) {
	code, body, err := get(ctx, "/metrics")
	if err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d %v", code, err)
	}
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("no sample %s in /metrics", series)
}

// counter is a counter's value in /metrics; a series not yet created
// counts as 0.
func counter(ctx context.Context, series string) (float64, error) {
	v, err := metric(ctx, series)
	if err != nil && strings.HasPrefix(err.Error(), "no sample") {
		return 0, nil
	}
	return v, err
}

// sent is one review of the traffic and what came back.
type sent struct {
	name string
	at   time.Time
	answer
	err error
}

// traffic posts a fixed set of reviews to the webhook, paced by a ticker,
// until stopped, and keeps every answer.
type traffic struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	answers []sent
}

// review is one of the traffic's requests.
type review struct {
	name, path string
	body       []byte
}

// startTraffic sends every review about perSecond times a second each.
func startTraffic(ctx context.Context, perSecond int, reviews ...review) *traffic {
	ctx, cancel := context.WithCancel(ctx)
	tr := &traffic{cancel: cancel}
	for _, r := range reviews {
		tr.wg.Go(func() {
			tick := time.NewTicker(time.Second / time.Duration(perSecond))
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				at := time.Now()
				a, err := post(ctx, r.path, r.body)
				if ctx.Err() != nil {
					return
				}
				tr.mu.Lock()
				tr.answers = append(tr.answers, sent{name: r.name, at: at, answer: a, err: err})
				tr.mu.Unlock()
			}
		})
	}
	return tr
}

// stop ends the traffic and returns every answer.
func (tr *traffic) stop() []sent {
	tr.cancel()
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.answers
}

// waitReadyz waits until /readyz passes (ready) or fails, returning its
// verbose body.
func waitReadyz(ctx context.Context, ready bool, timeout time.Duration) (string, error) {
	var body string
	err := framework.Eventually(ctx, timeout, fmt.Sprintf("/readyz to pass = %v", ready), func(ctx context.Context) (bool, string, error) {
		code, b, err := get(ctx, "/readyz?verbose")
		if err != nil {
			return false, err.Error(), nil
		}
		body = b
		return (code == http.StatusOK) == ready, fmt.Sprintf("%d: %s", code, b), nil
	})
	return body, err
}
